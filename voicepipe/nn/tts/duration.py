"""Duration predictor: phoneme ids → per-phoneme durations in hibari's 25 ms units.

Trained on the teacher's own durations (hibari's ``/Clip_output_0``); at
inference its rounded output gives the codec LM its frame alignment. A conv
stack (bidirectional: the whole text chunk is known) then a 2-layer
transformer encoder for sentence-level context (pauses at punctuation, the
long final pad), predicting log(1 + units).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class DurArgs:
    n_phon: int = 178
    dim: int = 192
    conv_layers: int = 3
    attn_layers: int = 2
    n_heads: int = 4
    max_len: int = 512

    def to_dict(self) -> dict:
        return asdict(self)


class DurationPredictor(nn.Module):
    def __init__(self, a: DurArgs) -> None:
        super().__init__()
        self.args = a
        self.emb = nn.Embedding(a.n_phon, a.dim)
        self.pos = nn.Embedding(a.max_len, a.dim)
        self.convs = nn.ModuleList(
            [nn.Conv1d(a.dim, a.dim, 5, padding=2) for _ in range(a.conv_layers)]
        )
        self.norms = nn.ModuleList([nn.LayerNorm(a.dim) for _ in range(a.conv_layers)])
        layer = nn.TransformerEncoderLayer(
            a.dim, a.n_heads, 4 * a.dim, dropout=0.1, batch_first=True, norm_first=True
        )
        self.attn = nn.TransformerEncoder(layer, a.attn_layers, enable_nested_tensor=False)
        self.out = nn.Linear(a.dim, 1)

    def forward(self, phon: Tensor, pad_mask: Tensor | None = None) -> Tensor:
        """phon (B, P) → log(1 + units) (B, P); pad_mask (B, P) True where padding."""
        p = phon.shape[1]
        pos = torch.arange(p, device=phon.device).clamp(max=self.args.max_len - 1)
        x = self.emb(phon) + self.pos(pos)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            x = x + F.gelu(conv(norm(x).transpose(1, 2))).transpose(1, 2)
        x = self.attn(x, src_key_padding_mask=pad_mask)
        return self.out(x).squeeze(-1)

    @torch.no_grad()
    def predict(self, ids: list[int], pace: float = 1.0) -> list[int]:
        """Integer durations (25 ms units) for one id sequence; pace > 1 speaks slower."""
        logd = self(torch.tensor([ids], dtype=torch.long))[0]
        units = torch.clamp(torch.expm1(logd.float()) * pace, min=0.0)
        return [int(u) for u in torch.round(units).tolist()]


def duration_loss(model: DurationPredictor, phon: Tensor, dur: Tensor, mask: Tensor) -> Tensor:
    """MSE in log(1 + units) over real (non-pad) phonemes; mask (B, P) True = real."""
    pred = model(phon, pad_mask=~mask)
    target = torch.log1p(dur.float())
    m = mask.float()
    return (((pred - target) ** 2) * m).sum() / m.sum().clamp(min=1.0)
