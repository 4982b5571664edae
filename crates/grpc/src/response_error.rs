//! A decoded Generate answer the gateway cannot read, from either service.

/// A Generate answer the gateway cannot read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    /// A message without the output it exists for (a field from a newer proto, or garbage
    /// that happened to parse).
    Empty,
    /// A finish reason outside vLLM's set (SMG's string, or vLLM's enum number).
    UnknownFinishReason(String),
    /// A sample index other than 0: the gateway sends n = 1 and fans out itself.
    UnexpectedIndex(u32),
    /// Output after the finishing message.
    AfterComplete,
    /// The call ended with status OK but without a finish.
    NoComplete,
    /// Logprob lists of different lengths.
    LogprobShape(&'static str),
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseError::Empty => f.write_str("GenerateResponse without output"),
            ResponseError::UnknownFinishReason(r) => write!(f, "unknown finish_reason {r:?}"),
            ResponseError::UnexpectedIndex(i) => write!(f, "output for sample index {i} of a single-sample request"),
            ResponseError::AfterComplete => f.write_str("output after the request finished"),
            ResponseError::NoComplete => f.write_str("Generate ended without a finish"),
            ResponseError::LogprobShape(what) => write!(f, "{what} logprob lists of different lengths"),
        }
    }
}

impl std::error::Error for ResponseError {}
