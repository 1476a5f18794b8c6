//! Chat prompts in the ChatML format.
//!
//! SmolLM2-Instruct's GGUF declares its prompt format as a jinja template
//! (`tokenizer.chat_template`):
//!
//! ```jinja
//! {% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}
//! {{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}
//! {% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}
//! {% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
//! ```
//!
//! (line breaks added here; the template has none outside its strings). [`ChatTemplate`]
//! implements that template in Rust rather than embedding a jinja engine;
//! `volta/tests/tokenizer.rs` checks it against the template rendered by Python's
//! `jinja2`.
//!
//! ```
//! use volta::models::{ChatTemplate, Message};
//!
//! let prompt = ChatTemplate::smollm2().render(&[Message::user("Hi!")]);
//! assert_eq!(
//!     prompt,
//!     "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
//!      <|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
//! );
//! ```

use std::fmt;

/// Who speaks a [`Message`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The person talking to the model.
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The role's name in the prompt: `system`, `user` or `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl Message {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
}

/// The ChatML prompt format: each message as `<|im_start|>{role}\n{content}<|im_end|>\n`,
/// a default system message when the conversation does not open with one, and
/// `<|im_start|>assistant\n` at the end for the model to continue from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatTemplate {
    default_system: Option<String>,
}

impl ChatTemplate {
    /// SmolLM2-Instruct's default system prompt, from its GGUF's chat template.
    pub const SMOLLM2_SYSTEM: &'static str =
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

    /// ChatML with `default_system` inserted when the first message is not a system
    /// message (`None`: nothing inserted).
    pub fn chatml(default_system: Option<&str>) -> Self {
        Self {
            default_system: default_system.map(str::to_owned),
        }
    }

    /// The template SmolLM2-Instruct's GGUF declares: ChatML with
    /// [`SMOLLM2_SYSTEM`](Self::SMOLLM2_SYSTEM) as the default system prompt.
    pub fn smollm2() -> Self {
        Self::chatml(Some(Self::SMOLLM2_SYSTEM))
    }

    /// The prompt for `messages`, ending with the generation prompt
    /// (`<|im_start|>assistant\n`); jinja's `add_generation_prompt=true`.
    pub fn render(&self, messages: &[Message]) -> String {
        let mut out = self.render_messages(messages);
        out.push_str("<|im_start|>assistant\n");
        out
    }

    /// The conversation alone, without the generation prompt
    /// (`add_generation_prompt=false`).
    pub fn render_messages(&self, messages: &[Message]) -> String {
        let mut out = String::new();
        let mut turn = |role: &str, content: &str| {
            out.push_str("<|im_start|>");
            out.push_str(role);
            out.push('\n');
            out.push_str(content);
            out.push_str("<|im_end|>\n");
        };
        // As in the template, an empty conversation gets no system message either.
        if let (Some(first), Some(system)) = (messages.first(), &self.default_system)
            && first.role != Role::System
        {
            turn("system", system);
        }
        for m in messages {
            turn(m.role.as_str(), &m.content);
        }
        out
    }
}
