"""A character tokenizer with a fixed, readable vocabulary.

Every character is one token, so a learner can read a token sequence directly:

    id 0 PAD   1 BOS   2 EOS   then  " 0123456789+-*=(),:;.?"  then  "a".."z"

``encode`` maps text to ids (no special tokens added), ``decode`` maps ids back,
skipping PAD and BOS and stopping at the first EOS. ``encode_prompts`` builds
the batch a model reads: BOS + prompt, left-padded with PAD, plus its
attention mask (1 = real token, 0 = padding).
"""
from __future__ import annotations

import torch

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIALS = (PAD, BOS, EOS)
CHARS = " 0123456789+-*=(),:;.?" + "abcdefghijklmnopqrstuvwxyz"

VOCAB = SPECIALS + tuple(CHARS)
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
VOCAB_SIZE = len(VOCAB)
_ID = {ch: i for i, ch in enumerate(VOCAB)}


def encode(text: str) -> list[int]:
    """Text -> token ids, one per character. Raises ValueError on a character outside the vocabulary."""
    try:
        return [_ID[ch] for ch in text]
    except KeyError:
        bad = sorted({ch for ch in text if ch not in _ID})
        raise ValueError(f"cannot encode {bad!r} in {text!r}: the vocabulary is {CHARS!r} "
                         "(plus PAD, BOS, EOS)") from None


def decode(ids) -> str:
    """Token ids -> text. Stops at the first EOS; skips PAD and BOS. Accepts a list or a 1-D tensor."""
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    out = []
    for i in ids:
        if i == EOS_ID:
            break
        if i in (PAD_ID, BOS_ID):
            continue
        if not 0 <= i < VOCAB_SIZE:
            raise ValueError(f"token id {i} is outside the vocabulary (0..{VOCAB_SIZE - 1})")
        out.append(VOCAB[i])
    return "".join(out)


def left_pad(rows: list[list[int]], device=None, pad_id: int = PAD_ID) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists to one (B, L) tensor; returns (ids, mask) with mask 1 on real tokens."""
    if not rows:
        raise ValueError("left_pad needs at least one row")
    width = max(len(r) for r in rows)
    ids = [[pad_id] * (width - len(r)) + list(r) for r in rows]          # lists first: one tensor each,
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]         # not one per row
    return (torch.tensor(ids, dtype=torch.long, device=device),
            torch.tensor(mask, dtype=torch.long, device=device))


def encode_prompts(prompts: list[str], device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts -> (ids, mask), each row BOS + prompt, left-padded: the input ``sample`` expects."""
    return left_pad([[BOS_ID] + encode(p) for p in prompts], device=device)


def repad_left(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Move each row's real tokens to the right end, keeping their order: (ids, mask) left-padded again.

    Use it to resume partial answers: ``repad_left(cat([prompt_ids, s.tokens], 1), cat([prompt_mask, s.mask], 1))``
    is a valid prompt batch for ``sample`` even where rows stopped at different lengths.
    """
    order = torch.argsort(mask.long(), dim=1, stable=True)     # padding (0) first, real tokens (1) after
    return ids.gather(1, order), mask.gather(1, order)
