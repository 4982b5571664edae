//! `shardgate template`: the chat prompt the gateway would build for each request, without an
//! engine. For operators debugging a template, and for tests that compare our rendering with
//! transformers' `apply_chat_template`.

use std::io::{BufRead, Write};

use crate::api::fields::Body;
use crate::api::openai::chat::render_prompt;
use crate::config::TemplateArgs;
use crate::startup::StartupError;
use shardgate_text::model::{ModelAssets, ModelSource};
use shardgate_text::render::{RenderedPrompt, Renderer};
use shardgate_text::TemplateError;
use shardgate_util::json::push_str;

pub fn render_templates(args: &TemplateArgs) -> Result<(), StartupError> {
    let model_path = match (&args.model_path, &args.tokenizer_package) {
        (Some(p), _) => p.clone(),
        (None, Some(pkg)) => shardgate_text::assets::npm_tokenizer(pkg)?,
        (None, None) => return Err(StartupError::NoModel),
    };
    let model = std::sync::Arc::new(ModelAssets::load(&ModelSource {
        model_path: model_path.clone(),
        tokenizer_path: None,
        chat_template: args.chat_template.clone(),
        served_name: "template".into(),
        use_generation_config: true,
    })?);
    let renderer = Renderer::for_model(&model).map_err(|e| match e {
        TemplateError::Missing => StartupError::NoChatTemplate,
        e => e.into(),
    })?;
    let vision = crate::media::Vision::load(&model_path, &model_path.display().to_string(), &model, None);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(StartupError::Stdin)?;
        if line.trim().is_empty() {
            continue;
        }
        let mut json = String::new();
        let mut media = crate::media::Collector::new(&vision, "template");
        let rendered =
            Body::parse(line.as_bytes()).and_then(|body| render_prompt(&model, &renderer, &body.fields(), &mut media));
        match rendered {
            Ok(r) => {
                json.push_str("{\"prompt\":");
                let text = match &r.prompt {
                    RenderedPrompt::Text(text) => text.clone(),
                    RenderedPrompt::Tokens(ids) => model.tokenizer.decode(ids, false).unwrap_or_default(),
                };
                push_str(&mut json, &text);
            }
            Err(e) => {
                json.push_str("{\"error\":");
                push_str(&mut json, &e.message);
            }
        }
        json.push('}');
        writeln!(out, "{json}").map_err(StartupError::Stdout)?;
    }
    Ok(())
}
