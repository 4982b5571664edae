//! Tool-call formats as data: which decoder reads a region, and the JSON and
//! Python-literal families (the tagged ones are in `tag_formats`). Formats
//! are written from the models' public chat templates and reference
//! parsers; see docs/parsers.md for examples.

use super::inkling::InklingDecoder;
use super::json_call::{CallKeys, JsonRegion, JsonSyntax};
use super::markup::HeaderEnd;
use super::mistral::MistralDecoder;
use super::python_calls::{PyShape, PySyntax, PythonCallsDecoder};
use super::region::RegionDecoder;
use super::tagged::{TagDecoder, TagSyntax};

/// Which decoder reads a region, and with which syntax.
pub(crate) enum DecoderKind {
    /// The trigger opened a section of calls.
    TagSection(&'static TagSyntax),
    /// The trigger opened one call (no section).
    TagCall(&'static TagSyntax),
    Json(&'static JsonSyntax),
    Mistral,
    InklingHeader,
    InklingJson,
    InklingText,
    Python(&'static PySyntax),
}

/// Text that opens a tool region.
pub(crate) struct Trigger {
    pub marker: &'static str,
    /// Only as the first non-blank text of the output (bare JSON or lists,
    /// where the same character is common in prose). The decoder then sees
    /// the marker itself (it is the first character of the call).
    pub at_output_start: bool,
    pub decoder: DecoderKind,
}

/// A tool-call format as data.
pub(crate) struct Family {
    pub triggers: &'static [Trigger],
    /// Framing markers removed from content.
    pub content_drop: &'static [&'static str],
}

impl DecoderKind {
    pub(crate) fn build(&self) -> Box<dyn RegionDecoder> {
        match self {
            DecoderKind::TagSection(syntax) => Box::new(TagDecoder::in_section(syntax)),
            DecoderKind::TagCall(syntax) => Box::new(TagDecoder::bare_call(syntax)),
            DecoderKind::Json(syntax) => Box::new(JsonRegion::new(syntax)),
            DecoderKind::Mistral => Box::new(MistralDecoder::new()),
            DecoderKind::InklingHeader => Box::new(InklingDecoder::after_header_start()),
            DecoderKind::InklingJson => Box::new(InklingDecoder::json_call()),
            DecoderKind::InklingText => Box::new(InklingDecoder::suppressed()),
            DecoderKind::Python(syntax) => Box::new(PythonCallsDecoder::new(syntax)),
        }
    }
}

pub(crate) const fn anywhere(marker: &'static str, decoder: DecoderKind) -> Trigger {
    Trigger { marker, at_output_start: false, decoder }
}

const fn at_start(marker: &'static str, decoder: DecoderKind) -> Trigger {
    Trigger { marker, at_output_start: true, decoder }
}

pub(crate) const fn consumed(text: &'static str) -> HeaderEnd {
    HeaderEnd { text, consume: true }
}

pub(crate) const fn kept(text: &'static str) -> HeaderEnd {
    HeaderEnd { text, consume: false }
}

// ---- passthrough -----------------------------------------------------------

pub(crate) static PASSTHROUGH: Family = Family { triggers: &[], content_drop: &[] };

// ---- JSON objects ----------------------------------------------------------

/// `{"name": ..., "arguments": {...}}` or an array of them, as the whole
/// output (leading blanks allowed).
static JSON_BARE: JsonSyntax = JsonSyntax::calls(true, None, &[]);

pub(crate) static JSON: Family = Family {
    triggers: &[at_start("{", DecoderKind::Json(&JSON_BARE)), at_start("[", DecoderKind::Json(&JSON_BARE))],
    content_drop: &[],
};

pub(crate) static MISTRAL: Family =
    Family { triggers: &[anywhere("[TOOL_CALLS]", DecoderKind::Mistral)], content_drop: &[] };

/// `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
static QWEN_JSON: JsonSyntax = JsonSyntax::calls(false, None, &["</tool_call>"]);

pub(crate) static QWEN: Family =
    Family { triggers: &[anywhere("<tool_call>", DecoderKind::Json(&QWEN_JSON))], content_drop: &[] };

/// `<|python_tag|>{"name": ..., "parameters": {...}}`, calls separated by `;`;
/// without the tag only as the whole output.
static LLAMA_TAGGED: JsonSyntax = JsonSyntax::calls(false, Some(';'), &[]);
static LLAMA_BARE: JsonSyntax = JsonSyntax::calls(true, Some(';'), &[]);

pub(crate) static LLAMA: Family = Family {
    triggers: &[
        anywhere("<|python_tag|>", DecoderKind::Json(&LLAMA_TAGGED)),
        at_start("{", DecoderKind::Json(&LLAMA_BARE)),
    ],
    content_drop: &[],
};

/// `<|START_ACTION|>{"tool_name": ..., "parameters": {...}}<|END_ACTION|>`
/// (or an array of calls).
static COHERE_JSON: JsonSyntax = JsonSyntax {
    keys: CallKeys { name: &["tool_name", "name"], arguments: &["parameters", "arguments"] },
    ..JsonSyntax::calls(false, None, &["<|END_ACTION|>"])
};

pub(crate) static COHERE: Family = Family {
    triggers: &[anywhere("<|START_ACTION|>", DecoderKind::Json(&COHERE_JSON))],
    content_drop: &["<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"],
};

pub(crate) static INKLING: Family = Family {
    triggers: &[
        anywhere("<|message_model|>", DecoderKind::InklingHeader),
        anywhere("<|content_invoke_tool_json|>", DecoderKind::InklingJson),
        anywhere("<|content_invoke_tool_text|>", DecoderKind::InklingText),
    ],
    content_drop: &[
        "<|content_text|>",
        "<|content_thinking|>",
        "<|end_message|>",
        "<|content_model_end_sampling|>",
        "<|endoftext|>",
    ],
};

// ---- Python literals -------------------------------------------------------

static PYTHONIC_BARE: PySyntax = PySyntax { shape: PyShape::CallList, strict_names: true };

pub(crate) static PYTHONIC: Family = Family {
    triggers: &[at_start("[", DecoderKind::Python(&PYTHONIC_BARE))],
    content_drop: &["<|python_start|>", "<|python_end|>"],
};

static SARASHINA_MARKED: PySyntax = PySyntax { shape: PyShape::DictList, strict_names: false };

static SARASHINA_BARE: PySyntax = PySyntax { shape: PyShape::DictList, strict_names: true };

pub(crate) static SARASHINA: Family = Family {
    triggers: &[
        anywhere("<|tool_calls|>", DecoderKind::Python(&SARASHINA_MARKED)),
        at_start("[", DecoderKind::Python(&SARASHINA_BARE)),
    ],
    content_drop: &[],
};
