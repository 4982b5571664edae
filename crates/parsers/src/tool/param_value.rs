//! Parameter values of the tagged formats: typed from the tool schema (or a
//! type attribute) and written into the arguments object. A string value is
//! streamed as it arrives; anything else is typed once it is complete.

use serde_json::Value;

use super::markup::{attribute_value, decode_entities};
use super::schema::{self, ValueType};
use super::sink::{CallSink, ObjectWriter};

/// Where a parameter's value type comes from.
pub(crate) enum Typing {
    /// The tool's JSON schema.
    Schema,
    /// `string="true"` means string, else JSON.
    StringAttribute(&'static str),
    /// `type="string"` means string, else JSON.
    TypeAttribute(&'static str),
}

/// How value text is cleaned before typing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueText {
    Verbatim,
    /// One leading and one trailing newline belong to the markup.
    StripNewline,
    Trim,
    XmlEntities,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueMode {
    /// String value written as it arrives.
    Stream,
    /// Whole value typed when it ends.
    Buffer(ValueType),
    /// Repeated key: dropped.
    Skip,
}

pub(crate) struct ValueState {
    key: String,
    mode: ValueMode,
    started: bool,
    buffer: String,
}

impl ValueState {
    /// A parameter value about to start: decides from the declared type
    /// whether it streams (strings) or is typed when complete.
    pub(crate) fn new(
        key: String,
        typing: &Typing,
        cleaning: ValueText,
        header_text: &str,
        property_schema: Option<&Value>,
    ) -> Self {
        let value_type = match typing {
            Typing::Schema => schema::value_type(property_schema),
            Typing::StringAttribute(attribute) => match attribute_value(header_text, attribute).as_deref() {
                Some("false") => ValueType::Unknown,
                _ => ValueType::String,
            },
            Typing::TypeAttribute(attribute) => match attribute_value(header_text, attribute).as_deref() {
                Some("string") => ValueType::String,
                _ => ValueType::Unknown,
            },
        };
        let streamable = matches!(cleaning, ValueText::Verbatim | ValueText::StripNewline);
        let mode = if value_type == ValueType::String && streamable {
            ValueMode::Stream
        } else {
            ValueMode::Buffer(value_type)
        };
        Self { key, mode, started: false, buffer: String::new() }
    }

    /// Takes the next piece of value text (`ended`: the value ends after
    /// it). Returns the bytes consumed, or `None` to wait for more text.
    pub(crate) fn take(
        &mut self,
        piece: &str,
        ended: bool,
        cleaning: ValueText,
        writer: Option<&mut ObjectWriter>,
        sink: &mut CallSink,
    ) -> Option<usize> {
        match self.mode {
            ValueMode::Stream => stream_piece(self, piece, ended, cleaning, writer, sink),
            ValueMode::Buffer(_) => {
                self.buffer.push_str(piece);
                Some(piece.len())
            }
            ValueMode::Skip => Some(piece.len()),
        }
    }

    /// Writes the finished value as an arguments member.
    pub(crate) fn finish(self, cleaning: ValueText, writer: Option<&mut ObjectWriter>, sink: &mut CallSink) {
        complete_value(self, cleaning, writer, sink);
    }
}

/// Writes the decided part of a streamed string value; `None` to wait.
/// Returns the bytes of `piece` consumed.
fn stream_piece(
    value: &mut ValueState,
    piece: &str,
    ended: bool,
    cleaning: ValueText,
    writer: Option<&mut ObjectWriter>,
    sink: &mut CallSink,
) -> Option<usize> {
    let strip = cleaning == ValueText::StripNewline;
    let mut start = 0;
    if !value.started {
        // The first character decides whether a markup newline is dropped.
        if strip && piece.is_empty() && !ended {
            return None;
        }
        value.started = true;
        let writes = writer.is_some_and(|w| w.key(&value.key, sink));
        if !writes {
            value.mode = ValueMode::Skip;
            return Some(piece.len());
        }
        sink.args("\"");
        if strip && piece.starts_with('\n') {
            start = 1;
        }
    }
    let mut end = piece.len();
    // A trailing newline is markup only if the value ends right after it.
    if strip && end > start && piece.ends_with('\n') {
        end -= 1;
    }
    sink.args(&json_string_body(&piece[start..end]));
    Some(if ended { piece.len() } else { end })
}

/// Writes a finished value as an arguments member.
fn complete_value(value: ValueState, cleaning: ValueText, writer: Option<&mut ObjectWriter>, sink: &mut CallSink) {
    let Some(writer) = writer else {
        return;
    };
    match value.mode {
        ValueMode::Stream if value.started => sink.args("\""),
        ValueMode::Stream => writer.member(&value.key, &Value::String(String::new()), sink),
        ValueMode::Buffer(value_type) => {
            let text = clean(&value.buffer, cleaning);
            writer.member(&value.key, &schema::convert(&text, value_type), sink);
        }
        ValueMode::Skip => {}
    }
}

fn clean(text: &str, cleaning: ValueText) -> String {
    match cleaning {
        ValueText::Verbatim => text.to_string(),
        ValueText::StripNewline => {
            let text = text.strip_prefix('\n').unwrap_or(text);
            text.strip_suffix('\n').unwrap_or(text).to_string()
        }
        ValueText::Trim => text.trim().to_string(),
        ValueText::XmlEntities => decode_entities(text),
    }
}

/// JSON string escaping of `text`, without the quotes. Escaping is per
/// character, so escaped pieces concatenate to the escaped whole.
fn json_string_body(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}
