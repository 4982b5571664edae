//! A stand-in for `reqwest` 0.12, patched in by the workspace (`[patch.crates-io]`), offering
//! exactly what openai-harmony 0.0.8 calls: `blocking::Client::new().get(url).send()`, and
//! failing there.
//!
//! openai-harmony downloads its tokenizer vocabulary when `TIKTOKEN_ENCODINGS_BASE` does not
//! name a directory holding it. The gateway always names one and writes the file there from
//! the model's own tokenizer (`shardgate_text::render::harmony_encoding`), so a download would
//! be a bug: with this stand-in it is an error instead of a surprise connection from a serving
//! host. It also keeps tokio, hyper and rustls out of the build.

pub mod blocking {
    use std::fmt;
    use std::io::Read;

    /// Every request fails with this.
    #[derive(Debug)]
    pub struct Error;

    impl fmt::Display for Error {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("downloads are disabled in shardgate: set TIKTOKEN_ENCODINGS_BASE to a directory with the vocabulary file")
        }
    }

    impl std::error::Error for Error {}

    #[derive(Debug, Default)]
    pub struct Client;

    #[derive(Debug)]
    pub struct RequestBuilder;

    /// Never made: `send` fails first.
    #[derive(Debug)]
    pub struct Response;

    impl Client {
        pub fn new() -> Self {
            Client
        }

        pub fn get<U: AsRef<str>>(&self, _url: U) -> RequestBuilder {
            RequestBuilder
        }
    }

    impl RequestBuilder {
        pub fn send(self) -> Result<Response, Error> {
            Err(Error)
        }
    }

    impl Response {
        pub fn error_for_status(self) -> Result<Response, Error> {
            Ok(self)
        }
    }

    impl Read for Response {
        fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
            Ok(0)
        }
    }
}
