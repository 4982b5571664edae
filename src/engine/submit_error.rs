//! Why an ADD was not sent.

use crate::error::{ApiError, EngineFault};

#[derive(Debug)]
pub enum SubmitError {
    /// The link failed or was closed: the request never reached an engine (`retry_safe`).
    Fault(EngineFault),
    /// This engine cannot take the request as it is (TokenSpeed's limits), or its relay queue
    /// is full: the client's answer, never routed around.
    Refused(ApiError),
}

impl SubmitError {
    pub fn to_api_error(&self) -> ApiError {
        match self {
            SubmitError::Fault(f) => f.to_api_error(),
            SubmitError::Refused(e) => e.clone(),
        }
    }
}

impl From<ApiError> for SubmitError {
    fn from(e: ApiError) -> Self {
        SubmitError::Refused(e)
    }
}
