use super::*;
use serde_json::json;

fn render(template: &str, messages: serde_json::Value) -> Result<String, TemplateError> {
    render_with(template, messages, None, &[])
}

fn render_with(
    template: &str,
    messages: serde_json::Value,
    tools: Option<serde_json::Value>,
    extra: &[(String, serde_json::Value)],
) -> Result<String, TemplateError> {
    let t = ChatTemplate::compile(template)?;
    t.render(&RenderInput {
        messages: &messages,
        tools: tools.as_ref(),
        documents: None,
        add_generation_prompt: true,
        continue_final_message: false,
        extra,
    })
}

#[test]
fn python_behaviours_templates_rely_on() {
    let cases: [(&str, &str); 9] = [
        ("{{ true }}|{{ false }}|{{ none }}", "True|False|None"),
        ("{{ '  x  '.strip() }}|{{ 'a,b'.split(',')|length }}|{{ 'Hi'.startswith('H') }}", "x|2|True"),
        ("{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}", "a=1"),
        ("{{ {'a': 1}.get('b', 'dflt') }}", "dflt"),
        ("{{ {'b': [1, 2.5, 'é<'], 'a': none} | tojson }}", "{\"b\": [1, 2.5, \"é<\"], \"a\": null}"),
        ("{{ {'a': 1} | tojson(indent=2) }}", "{\n  \"a\": 1\n}"),
        ("{{ 'é' | tojson(ensure_ascii=True) }}", "\"\\u00e9\""),
        ("{% set ns = namespace(x=1 if add_generation_prompt else 2) %}{{ ns.x }}", "1"),
        ("{% generation %}kept{% endgeneration %}", "kept"),
    ];
    for (template, expected) in cases {
        assert_eq!(render(template, json!([])).unwrap(), expected, "template {template}");
    }
}

#[test]
fn trim_and_lstrip_blocks_like_transformers() {
    let t = "{% for m in messages %}\n    {{ m.content }}\n{% endfor %}\n";
    assert_eq!(render(t, json!([{"content": "a"}, {"content": "b"}])).unwrap(), "    a\n    b\n");
}

#[test]
fn raise_exception_message_reaches_the_client() {
    let e = render("{{ raise_exception('System role not supported') }}", json!([])).unwrap_err();
    assert_eq!(e, TemplateError::Raised("System role not supported".into()));
    assert_eq!(e.to_string(), "System role not supported");
}

#[test]
fn compile_errors_are_reported() {
    assert!(ChatTemplate::compile("{% for %}").is_err());
}

#[test]
fn continue_final_message_cuts_after_the_last_content() {
    let t = ChatTemplate::compile("{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}").unwrap();
    let messages = json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once upon"}]);
    let out = t
        .render(&RenderInput {
            messages: &messages,
            tools: None,
            documents: None,
            add_generation_prompt: false,
            continue_final_message: true,
            extra: &[],
        })
        .unwrap();
    assert_eq!(out, "<user>hi</s><assistant>Once upon");
}

#[test]
fn extra_variables_and_tools_are_visible() {
    let t = "{{ bos_token }}{% if tools %}{{ tools[0].function.name }}{% endif %}{% if enable_thinking is defined and not enable_thinking %}/no_think{% endif %}";
    let extra = [("bos_token".to_string(), json!("<s>")), ("enable_thinking".to_string(), json!(false))];
    let tools = json!([{"type": "function", "function": {"name": "get_weather"}}]);
    assert_eq!(render_with(t, json!([]), Some(tools), &extra).unwrap(), "<s>get_weather/no_think");
}
