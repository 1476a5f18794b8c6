//! Volta in the browser: what the demo page (`web/www/`) calls through
//! wasm-bindgen. Built for `wasm32-unknown-unknown` by `scripts/web.sh`.
