//! `data:[<media type>][;base64],<data>` (RFC 2397), base64 only: an image's bytes in text.

use base64::Engine;

use crate::{FetchError, Fetched};

/// The bytes of a base64 `data:` URL, refused past `max_bytes` before decoding.
pub fn decode(url: &str, max_bytes: usize) -> Result<Fetched, FetchError> {
    let rest = url.get(5..).filter(|_| url[..5].eq_ignore_ascii_case("data:")).ok_or(FetchError::NotAUrl)?;
    let (header, data) = rest.split_once(',').ok_or(FetchError::DataUrl("no ',' before the data"))?;
    let media_type =
        header.strip_suffix(";base64").ok_or(FetchError::DataUrl("only base64 data URLs are accepted (';base64,')"))?;
    // Three bytes per four characters: refuse before allocating what the limit forbids.
    if data.len() / 4 * 3 > max_bytes + 2 {
        return Err(FetchError::TooLarge { max_bytes });
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim_end())
        .map_err(|_| FetchError::DataUrl("the data is not valid base64"))?;
    if bytes.len() > max_bytes {
        return Err(FetchError::TooLarge { max_bytes });
    }
    let media_type = (!media_type.is_empty()).then(|| media_type.to_ascii_lowercase());
    Ok(Fetched { bytes, media_type })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL, the byte limit, and the bytes and media type wanted.
    type Case = (&'static str, usize, Result<(&'static [u8], Option<&'static str>), FetchError>);

    #[test]
    fn data_urls() {
        let cases: [Case; 6] = [
            ("data:image/png;base64,aGk=", 10, Ok((b"hi", Some("image/png")))),
            ("DATA:;base64,aGk=", 10, Ok((b"hi", None))),
            ("data:image/png,hi", 10, Err(FetchError::DataUrl("only base64 data URLs are accepted (';base64,')"))),
            ("data:image/png;base64", 10, Err(FetchError::DataUrl("no ',' before the data"))),
            ("data:image/png;base64,!!!!", 10, Err(FetchError::DataUrl("the data is not valid base64"))),
            ("data:image/png;base64,aGVsbG8gd29ybGQ=", 4, Err(FetchError::TooLarge { max_bytes: 4 })),
        ];
        for (url, max, want) in cases {
            let got = decode(url, max);
            let want = want.map(|(b, t)| Fetched { bytes: b.to_vec(), media_type: t.map(str::to_string) });
            assert_eq!(got, want, "{url}");
        }
    }
}
