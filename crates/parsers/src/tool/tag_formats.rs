//! The tagged tool-call formats (name in markup), as data: qwen_xml, glm,
//! minimax m2/m3, DeepSeek (V3, V3.1, DSML), step3, kimik2 and kimi_k3.

use super::formats::Family;
use super::formats::{anywhere, consumed, kept, DecoderKind};
use super::markup::{Header, NameRule};
use super::param_value::{Typing, ValueText};
use super::tagged::{Body, ParamSyntax, Section, TagSyntax};

// ---- Name in markup, parameters as elements --------------------------------

/// ```text
/// <tool_call>
/// <function=get_weather>
/// <parameter=city>
/// Paris
/// </parameter>
/// </function>
/// </tool_call>
/// ```
static QWEN_XML_SYNTAX: TagSyntax = TagSyntax {
    section: Some(Section { close: "</tool_call>" }),
    between: &[],
    call: Header { open: "<function=", ends: &[consumed(">")], name: NameRule::Bare },
    call_close: &["</function>"],
    reopen_ends_call: true,
    body: Body::Params {
        params: ParamSyntax {
            header: Header { open: "<parameter=", ends: &[consumed(">")], name: NameRule::Bare },
            value_open: None,
            close: "</parameter>",
            typing: Typing::Schema,
            text: ValueText::StripNewline,
        },
        json_fallback: false,
    },
};

pub(crate) static QWEN_XML: Family = Family {
    triggers: &[
        anywhere("<tool_call>", DecoderKind::TagSection(&QWEN_XML_SYNTAX)),
        anywhere("<function=", DecoderKind::TagCall(&QWEN_XML_SYNTAX)),
    ],
    content_drop: &[],
};

/// GLM-4.5/4.6 put each part on its own line; GLM-4.7 and GLM-5 write them
/// back to back. One syntax reads both:
/// `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>`
static GLM_SYNTAX: TagSyntax = TagSyntax {
    section: None,
    between: &[],
    call: Header {
        open: "<tool_call>",
        ends: &[consumed("\n"), kept("<arg_key>"), kept("</tool_call>")],
        name: NameRule::Bare,
    },
    call_close: &["</tool_call>"],
    reopen_ends_call: true,
    body: Body::Params {
        params: ParamSyntax {
            header: Header { open: "<arg_key>", ends: &[consumed("</arg_key>")], name: NameRule::Bare },
            value_open: Some("<arg_value>"),
            close: "</arg_value>",
            typing: Typing::Schema,
            text: ValueText::Trim,
        },
        json_fallback: false,
    },
};

pub(crate) static GLM: Family =
    Family { triggers: &[anywhere("<tool_call>", DecoderKind::TagCall(&GLM_SYNTAX))], content_drop: &[] };

/// `<minimax:tool_call><invoke name="f"><parameter name="k">v</parameter></invoke></minimax:tool_call>`
static MINIMAX_M2_SYNTAX: TagSyntax = TagSyntax {
    section: Some(Section { close: "</minimax:tool_call>" }),
    between: &[],
    call: Header { open: "<invoke", ends: &[consumed(">")], name: NameRule::Attribute("name") },
    call_close: &["</invoke>"],
    reopen_ends_call: true,
    body: Body::Params {
        params: ParamSyntax {
            header: Header { open: "<parameter", ends: &[consumed(">")], name: NameRule::Attribute("name") },
            value_open: None,
            close: "</parameter>",
            typing: Typing::Schema,
            text: ValueText::XmlEntities,
        },
        json_fallback: false,
    },
};

pub(crate) static MINIMAX_M2: Family = Family {
    triggers: &[anywhere("<minimax:tool_call>", DecoderKind::TagSection(&MINIMAX_M2_SYNTAX))],
    content_drop: &[],
};

/// MiniMax-M2's shape with every tag behind the `]<]minimax[>[` namespace
/// marker and parameters as nested elements.
static MINIMAX_M3_SYNTAX: TagSyntax = TagSyntax {
    section: Some(Section { close: "]<]minimax[>[</tool_call>" }),
    between: &[],
    call: Header { open: "]<]minimax[>[<invoke", ends: &[consumed(">")], name: NameRule::Attribute("name") },
    call_close: &["]<]minimax[>[</invoke>"],
    // An element may be called `invoke...`; only `</invoke>` ends a call.
    reopen_ends_call: false,
    body: Body::Nested,
};

pub(crate) static MINIMAX_M3: Family = Family {
    triggers: &[anywhere("]<]minimax[>[<tool_call>", DecoderKind::TagSection(&MINIMAX_M3_SYNTAX))],
    content_drop: &[],
};

/// DeepSeek DSML (V3.2, V4, V4.1): the dialects differ in tag names only.
macro_rules! dsml {
    ($block_close:literal, $invoke:literal, $invoke_close:literal, $parameter:literal, $parameter_close:literal) => {
        TagSyntax {
            section: Some(Section { close: $block_close }),
            between: &[],
            call: Header { open: $invoke, ends: &[consumed(">")], name: NameRule::Attribute("name") },
            call_close: &[$invoke_close],
            reopen_ends_call: true,
            body: Body::Params {
                params: ParamSyntax {
                    header: Header { open: $parameter, ends: &[consumed(">")], name: NameRule::Attribute("name") },
                    value_open: None,
                    close: $parameter_close,
                    typing: Typing::StringAttribute("string"),
                    text: ValueText::Verbatim,
                },
                // Some engines' grammars emit the arguments as one JSON object.
                json_fallback: true,
            },
        }
    };
}

static DSML_V32_SYNTAX: TagSyntax = dsml!(
    "</｜DSML｜function_calls>",
    "<｜DSML｜invoke",
    "</｜DSML｜invoke>",
    "<｜DSML｜parameter",
    "</｜DSML｜parameter>"
);

static DSML_V4_SYNTAX: TagSyntax = dsml!(
    "</｜DSML｜tool_calls>",
    "<｜DSML｜invoke",
    "</｜DSML｜invoke>",
    "<｜DSML｜parameter",
    "</｜DSML｜parameter>"
);

static DSML_V41_SYNTAX: TagSyntax = dsml!(
    "</｜DSML｜ calls>",
    "<｜DSML｜ invoke",
    "</｜DSML｜ invoke>",
    "<｜DSML｜ parameter",
    "</｜DSML｜ parameter>"
);

const DEEPSEEK_DROP: &[&str] = &["<｜end▁of▁sentence｜>"];

pub(crate) static DEEPSEEK32: Family = Family {
    triggers: &[anywhere("<｜DSML｜function_calls>", DecoderKind::TagSection(&DSML_V32_SYNTAX))],
    content_drop: DEEPSEEK_DROP,
};

pub(crate) static DEEPSEEK_V4: Family = Family {
    triggers: &[anywhere("<｜DSML｜tool_calls>", DecoderKind::TagSection(&DSML_V4_SYNTAX))],
    content_drop: DEEPSEEK_DROP,
};

pub(crate) static DEEPSEEK_V41: Family = Family {
    triggers: &[
        anywhere("<｜DSML｜ calls>", DecoderKind::TagSection(&DSML_V41_SYNTAX)),
        // V4.1 also accepts an invoke outside a block.
        anywhere("<｜DSML｜ invoke", DecoderKind::TagCall(&DSML_V41_SYNTAX)),
    ],
    content_drop: DEEPSEEK_DROP,
};

/// `<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="f">
/// <steptml:parameter name="k">v</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>`
static STEP3_SYNTAX: TagSyntax = TagSyntax {
    section: Some(Section { close: "<｜tool_calls_end｜>" }),
    between: &["<｜tool_call_begin｜>", "function<｜tool_sep｜>", "<｜tool_call_end｜>"],
    call: Header { open: "<steptml:invoke", ends: &[consumed(">")], name: NameRule::Attribute("name") },
    call_close: &["</steptml:invoke>", "<｜tool_call_end｜>"],
    reopen_ends_call: true,
    body: Body::Params {
        params: ParamSyntax {
            header: Header { open: "<steptml:parameter", ends: &[consumed(">")], name: NameRule::Attribute("name") },
            value_open: None,
            close: "</steptml:parameter>",
            typing: Typing::Schema,
            text: ValueText::Trim,
        },
        json_fallback: false,
    },
};

pub(crate) static STEP3: Family = Family {
    triggers: &[anywhere("<｜tool_calls_begin｜>", DecoderKind::TagSection(&STEP3_SYNTAX))],
    content_drop: &[],
};

/// Kimi-K3 XTML `tools` channel:
/// `<|open|>tools<|sep|><|open|>call tool="f" index="0"<|sep|>
/// <|open|>argument key="k" type="string"<|sep|>v<|close|>argument<|sep|>
/// <|close|>call<|sep|><|close|>tools<|sep|>`
static KIMI_K3_SYNTAX: TagSyntax = TagSyntax {
    section: Some(Section { close: "<|close|>tools<|sep|>" }),
    between: &[],
    call: Header { open: "<|open|>call", ends: &[consumed("<|sep|>")], name: NameRule::Attribute("tool") },
    call_close: &["<|close|>call<|sep|>"],
    reopen_ends_call: true,
    body: Body::Params {
        params: ParamSyntax {
            header: Header { open: "<|open|>argument", ends: &[consumed("<|sep|>")], name: NameRule::Attribute("key") },
            value_open: None,
            close: "<|close|>argument<|sep|>",
            typing: Typing::TypeAttribute("type"),
            text: ValueText::Verbatim,
        },
        json_fallback: false,
    },
};

pub(crate) static KIMI_K3: Family = Family {
    triggers: &[anywhere("<|open|>tools<|sep|>", DecoderKind::TagSection(&KIMI_K3_SYNTAX))],
    // The answer's channel wrappers are framing (the reasoning parser removes
    // them too, when it runs).
    content_drop: &[
        "<|open|>message<|sep|>",
        "<|close|>message<|sep|>",
        "<|open|>response<|sep|>",
        "<|close|>response<|sep|>",
    ],
};

// ---- Name in markup, JSON arguments ----------------------------------------

/// `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
/// <|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>`
static KIMI_K2_SYNTAX: TagSyntax = TagSyntax {
    section: Some(Section { close: "<|tool_calls_section_end|>" }),
    between: &[],
    call: Header {
        open: "<|tool_call_begin|>",
        ends: &[consumed("<|tool_call_argument_begin|>")],
        name: NameRule::KimiFunctionId,
    },
    call_close: &["<|tool_call_end|>"],
    reopen_ends_call: true,
    body: Body::Json { fence: false },
};

pub(crate) static KIMI_K2: Family = Family {
    triggers: &[
        anywhere("<|tool_calls_section_begin|>", DecoderKind::TagSection(&KIMI_K2_SYNTAX)),
        anywhere("<|tool_call_begin|>", DecoderKind::TagCall(&KIMI_K2_SYNTAX)),
    ],
    content_drop: &[],
};

/// DeepSeek-V3: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>`
static DEEPSEEK_V3_SYNTAX: TagSyntax = TagSyntax {
    call: Header {
        open: "<｜tool▁call▁begin｜>",
        ends: &[consumed("\n"), kept("```"), kept("{")],
        name: NameRule::AfterSeparator("<｜tool▁sep｜>"),
    },
    ..DEEPSEEK_V3_SYNTAX_BASE
};

/// DeepSeek-V3.1: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`
static DEEPSEEK_V31_SYNTAX: TagSyntax = TagSyntax {
    call: Header { open: "<｜tool▁call▁begin｜>", ends: &[consumed("<｜tool▁sep｜>")], name: NameRule::Bare },
    ..DEEPSEEK_V3_SYNTAX_BASE
};

/// What the two DeepSeek JSON dialects share.
const DEEPSEEK_V3_SYNTAX_BASE: TagSyntax = TagSyntax {
    section: Some(Section { close: "<｜tool▁calls▁end｜>" }),
    between: &[],
    call: Header { open: "<｜tool▁call▁begin｜>", ends: &[], name: NameRule::Bare },
    call_close: &["<｜tool▁call▁end｜>"],
    reopen_ends_call: true,
    body: Body::Json { fence: true },
};

pub(crate) static DEEPSEEK_V3: Family = Family {
    triggers: &[
        anywhere("<｜tool▁calls▁begin｜>", DecoderKind::TagSection(&DEEPSEEK_V3_SYNTAX)),
        anywhere("<｜tool▁call▁begin｜>", DecoderKind::TagCall(&DEEPSEEK_V3_SYNTAX)),
    ],
    content_drop: DEEPSEEK_DROP,
};

pub(crate) static DEEPSEEK_V31: Family = Family {
    triggers: &[
        anywhere("<｜tool▁calls▁begin｜>", DecoderKind::TagSection(&DEEPSEEK_V31_SYNTAX)),
        anywhere("<｜tool▁call▁begin｜>", DecoderKind::TagCall(&DEEPSEEK_V31_SYNTAX)),
    ],
    content_drop: DEEPSEEK_DROP,
};
