"""The draft data's shard on disk: greedy replies as token ids, compact enough to commit.

A shard is a directory (``data/draft/<model>/`` in the repository by default):

- ``manifest.json``: the target model and weights, the reply cap, the stop ids and
  the prompt prefix every reply's prompt starts with (the served system prompt and
  tools block, rendered: ~460 ids for the 1.5B), stored once.
- ``part_NNNNN.npz`` (compressed): one flush of replies. Per reply its prompt id
  (``prompt_id``: a hash of the normalised question, so the id does not depend on
  the prompt list's order), the question text, the prompt's ids after the prefix, the
  reply's ids (uint32: Qwen's vocabulary passes 65,535) and whether it ended with a stop
  token (else it hit the cap). A part is written to a temporary name and renamed, so a
  killed job never leaves half of one; the job loses at most its unflushed replies.

Target features are not stored (the 1.5B's are 3 KB a token): a trainer recomputes them
from the ids. Resuming is idempotent: ``Shard.ids`` are skipped, and ``Shard.replies``
keeps the first reply of an id should two parts ever hold it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from voicepipe.training.draft_prompts import norm


def prompt_id(question: str) -> str:
    """A question's stable id: 16 hex digits of the SHA-1 of its normalised text."""
    return hashlib.sha1(norm(question).encode()).hexdigest()[:16]


def default_dir(model: str) -> Path:
    from voicepipe.registry import REPO_ROOT

    return REPO_ROOT / "data" / "draft" / model


@dataclass(frozen=True)
class Reply:
    pid: str
    question: str
    prompt: list[int]  # the whole prompt's ids (in a part: only those after the prefix)
    reply: list[int]
    ended: bool  # ended with a stop token (else the reply cap cut it)

    @classmethod
    def ask(cls, question: str, prompt: list[int]) -> Reply:
        """A job: a question and its rendered prompt, not yet answered."""
        return cls(prompt_id(question), question, prompt, [], False)

    def done(self, reply: list[int], ended: bool) -> Reply:
        return Reply(self.pid, self.question, self.prompt, list(reply), ended)


@dataclass(frozen=True)
class Manifest:
    model: str
    weights: str
    prefix: list[int]
    max_new: int
    stop_ids: list[int]


class ShardError(ValueError):
    pass


def _cat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lens = np.array([len(s) for s in seqs], dtype=np.int64)
    flat = [t for s in seqs for t in s]
    return np.asarray(flat, dtype=np.uint32), np.concatenate([[0], np.cumsum(lens)])


class Shard:
    def __init__(self, path: Path, meta: Manifest) -> None:
        self.path, self.meta = path, meta

    @classmethod
    def open(cls, path: Path, meta: Manifest) -> Shard:
        """The shard at ``path``, created with ``meta`` if new; an existing one must have
        been made with the same settings (else its replies would mix two targets')."""
        path.mkdir(parents=True, exist_ok=True)
        mf = path / "manifest.json"
        if mf.exists():
            have = Manifest(**json.loads(mf.read_text()))
            if have != meta:
                diff = [k for k, v in asdict(meta).items() if asdict(have)[k] != v]
                raise ShardError(
                    f"{path} holds replies made with other settings ({', '.join(diff)} differ): "
                    "use another --out, or the settings it was made with"
                )
        else:
            tmp = mf.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(meta)) + "\n")
            tmp.rename(mf)
        for stale in path.glob("*.tmp.npz"):  # a part whose write a kill interrupted
            stale.unlink()
        return cls(path, meta)

    @classmethod
    def load(cls, path: Path) -> Shard:
        mf = path / "manifest.json"
        if not mf.exists():
            raise ShardError(f"{path} is not a draft data shard (no manifest.json)")
        return cls(path, Manifest(**json.loads(mf.read_text())))

    def parts(self) -> list[Path]:
        return sorted(p for p in self.path.glob("part_*.npz") if not p.name.endswith(".tmp.npz"))

    def append(self, replies: list[Reply], prefix_len: int) -> Path:
        """Write ``replies`` (whole prompts: the prefix is cut off here) as the next part."""
        pre = self.meta.prefix
        for r in replies:
            if r.prompt[:prefix_len] != pre:
                raise ShardError(f"reply {r.pid}'s prompt does not start with the shard's prefix")
        parts = self.parts()
        n = int(parts[-1].stem.split("_")[1]) + 1 if parts else 0
        out = self.path / f"part_{n:05d}.npz"
        tmp = self.path / f"part_{n:05d}.tmp.npz"
        prompt, prompt_b = _cat([r.prompt[prefix_len:] for r in replies])
        reply, reply_b = _cat([r.reply for r in replies])
        np.savez_compressed(
            tmp,
            pid=np.array([r.pid for r in replies]),
            question=np.array([r.question for r in replies]),
            prompt=prompt,
            prompt_bounds=prompt_b,
            reply=reply,
            reply_bounds=reply_b,
            ended=np.array([r.ended for r in replies], dtype=bool),
        )
        tmp.rename(out)
        return out

    def replies(self) -> Iterator[Reply]:
        """Every reply, whole prompt restored, first of each id only."""
        seen: set[str] = set()
        for part in self.parts():
            for r in self.replies_of(part, self.meta.prefix):
                if r.pid not in seen:
                    seen.add(r.pid)
                    yield r

    @staticmethod
    def replies_of(part: Path, prefix: list[int]) -> Iterator[Reply]:
        """One part's replies, whole prompts restored (``prefix`` + the stored rest)."""
        pre = list(prefix)
        with np.load(part) as z:  # no pickle: plain arrays only
            pb, rb = z["prompt_bounds"], z["reply_bounds"]
            prompt, reply = z["prompt"], z["reply"]
            for i, (pid, q, ended) in enumerate(
                zip(z["pid"], z["question"], z["ended"], strict=True)
            ):
                p = pre + prompt[pb[i] : pb[i + 1]].tolist()
                yield Reply(str(pid), str(q), p, reply[rb[i] : rb[i + 1]].tolist(), bool(ended))

    def ids(self) -> set[str]:
        out: set[str] = set()
        for part in self.parts():
            with np.load(part) as z:
                out.update(str(x) for x in z["pid"])
        return out
