"""The text LLM: GGUF reading, tokenizer, the lean llama/qwen2 decoder with its KV and
prefix caches, packed int4/int8 weights and the fused C++ step, batched passes, and the
engine that puts a target and its EAGLE draft behind voicepipe.speculative's protocols.
"""
