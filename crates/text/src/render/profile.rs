//! SMG's DeepSeek request profile: a request whose model name has a `/`-separated part
//! naming a DeepSeek flash or pro deployment (any case, as in `deepseek-ai/DeepSeek-V4-Flash`)
//! thinks unless it turns thinking off. This overrides the DeepSeek-V4 renderer's default
//! (off); for renderers already on by default it changes nothing.

/// The names, lowercase, a part of the model name is compared with.
const THINKING_BY_DEFAULT: [&str; 4] =
    ["deepseek-v4-flash", "deepseek-v4-pro", "deepseek-v4.1-flash", "deepseek-flash"];

/// The thinking preference a request to `model_name` has when it states none.
pub fn default_preference(model_name: &str) -> Option<bool> {
    model_name
        .split('/')
        .any(|part| THINKING_BY_DEFAULT.iter().any(|name| part.eq_ignore_ascii_case(name)))
        .then_some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_parts_only() {
        let cases = [
            ("deepseek-ai/DeepSeek-V4-Flash", Some(true)),
            ("DEEPSEEK-V4-PRO", Some(true)),
            ("org/deepseek-v4.1-flash", Some(true)),
            ("deepseek-flash", Some(true)),
            ("deepseek-ai/DeepSeek-V4-Flash-0731", None),
            ("deepseek-ai/DeepSeek-V4", None),
            ("my-model", None),
        ];
        for (name, want) in cases {
            assert_eq!(default_preference(name), want, "{name}");
        }
    }
}
