"""What `bench startup --fresh-clone` reads off a `make run`'s lines."""

from __future__ import annotations

from voicepipe.bench.startup_fresh import STEPS, _reported

LINES = [
    (40.2, "voicepipe: compiling kernels/llama_step/llama_step.cpp for this CPU (AVX2), once"),
    (41.0, "voicepipe: compiling kernels/pack/pack.cpp for this CPU (AVX2), once per machine"),
    (43.1, "voicepipe: kernels/pack/pack.cpp compiled in 2.1 s"),
    (44.0, "voicepipe: packing qwen2.5-coder-1.5b (int4) …"),
    (95.3, "voicepipe: kernels/llama_step/llama_step.cpp compiled in 55 s"),
    (104.0, "voicepipe: packing x.gguf into int4: layer 1/28 (1 s)"),
    (110.0, "voicepipe: packing x.gguf into int4: layer 28/28 (7 s)"),
    (113.0, "voicepipe: packed weights cached in /h/packed/x.pt (later loads map them)"),
    (118.1, "voicepipe: starting pipeline assistant: loading its models …"),
    (131.0, "voicepipe: LLM qwen2.5-coder-1.5b ready (11.8 s)"),
    (133.0, "… INFO voicepipe.server.app: pipeline assistant ready in 14.9 s"),
    (133.1, "voicepipe: serving http://127.0.0.1:40111/  (WebSocket …)"),
]


def test_each_step_is_the_first_line_that_shows_it() -> None:
    steps = {}
    for t, line in LINES:
        for name, pat in STEPS:
            if name not in steps and pat.search(line):
                steps[name] = t
    assert steps == {
        "kernel_compile_started": 40.2,
        "kernels_compiled": 95.3,
        "packing_started": 44.0,
        "packed": 113.0,
        "serve_started": 118.1,
        "pipeline_ready": 133.0,
        "serving": 133.1,
    }


def test_the_durations_the_lines_state() -> None:
    assert _reported(LINES) == {
        "compile_pack_s": 2.1,
        "compile_llama_step_s": 55.0,
        "pack_layers_s": 7.0,
        "llm_loaded_s": 11.8,
        "models_loaded_s": 14.9,
    }
