"""``python -m <package> predict --onnx export/<name>.onnx INPUT``: an exported ONNX network
run by onnxruntime, without MindSpore. ``<name>.json`` (spec.py) says how INPUT becomes the
graph's input and what its output means:

    classifier      an image file        -> the top classes and their probabilities
    scorer          a raw user id        -> the top items among the training items the user has not
                                            interacted with (as recommend.py; --include-seen: all)
    ctr_model       user,item[,side...][,genre...] -> the probability that the user likes the item
                                            (side features in the spec's order; the item's genres
                                            from the spec unless given)
    image_encoder   an image file        -> its embedding
    text_encoder    a caption            -> its embedding
    lm              a text               -> the text continued (greedy, --tokens new tokens)

Needs numpy, pillow and onnxruntime (and tokenizers for a BPE tokenizer); this module and
what it imports never import MindSpore.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ..engine.errors import UserError

CHUNK = 1024  # rows per run of a graph with a dynamic batch


class Graph:
    """An ONNX file and its spec; ``__call__`` takes any number of rows, in the graph's batches."""

    def __init__(self, path: Path):
        try:
            import onnxruntime
        except ImportError:
            raise UserError("predict needs onnxruntime: pip install onnxruntime") from None
        spec = path.with_suffix(".json")
        if not path.is_file() or not spec.is_file():
            raise UserError(f"{path}: no such ONNX file with its {spec.name} beside it (export.py --format onnx)")
        self.spec = json.loads(spec.read_text(encoding="utf-8"))
        if "onnx" not in self.spec:
            raise UserError(f"{spec}: describes no ONNX export (export.py --format onnx)")
        self.name, self.meta, self.batch = path.stem, self.spec["meta"], self.spec["onnx"]["batch"]
        arrays = path.with_name(self.spec["arrays"]) if self.spec.get("arrays") else None
        if arrays is not None and not arrays.is_file():
            raise UserError(f"{arrays}: missing ({spec.name} lists it; copy it with the .onnx and .json)")
        self.arrays = dict(np.load(arrays)) if arrays is not None else {}
        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.inputs = [x.name for x in self.session.get_inputs()]
        graph_shapes = [list(x.shape[1:]) for x in self.session.get_inputs()]
        if self.inputs != [x["name"] for x in self.spec["inputs"]] or graph_shapes != [
                x["shape"][1:] for x in self.spec["inputs"]]:
            raise UserError(f"{path} does not match its {spec.name} (inputs {self.inputs} {graph_shapes}): "
                            "an ONNX file from another export? Export again into an empty folder")

    def __call__(self, *columns: np.ndarray) -> np.ndarray:
        """The first output for ``len(columns[0])`` rows, ``CHUNK`` at a time, or in the graph's
        fixed batches (the last one padded by repetition)."""
        rows, out, size = len(columns[0]), [], self.batch or CHUNK
        for start in range(0, rows, size):
            chunk = [c[start:start + size] for c in columns]
            if self.batch:
                chunk = [np.resize(c, (self.batch, *c.shape[1:])) for c in chunk]
            out.append(self.session.run(None, dict(zip(self.inputs, chunk)))[0][:rows - start])
        return np.concatenate(out)


def classify(graph: Graph, value: str, args: argparse.Namespace) -> list[dict]:
    from ..images.decode import eval_view

    logits = graph(eval_view(Path(value), graph.meta)[None])[0].astype(np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    classes = graph.meta.get("classes") or [str(i) for i in range(len(probs))]
    return [{"class": classes[i], "probability": float(probs[i])}
            for i in np.argsort(-probs, kind="stable")[:args.top]]


def recommend(graph: Graph, value: str, args: argparse.Namespace) -> list[dict]:
    from ..tasks.recommender.ids import IdMap

    users, items = IdMap.from_meta(graph.meta["users"]), IdMap.from_meta(graph.meta["items"])
    user = _raw_id(users, value.strip(), "user")
    candidates = items.known
    if not args.include_seen:
        if "seen_users" not in graph.arrays:
            raise UserError(f"{graph.name}.json lists no seen items (an export before they were kept): export "
                            "again, or pass --include-seen")
        seen_users, offsets = graph.arrays["seen_users"], graph.arrays["seen_offsets"]
        at = int(np.searchsorted(seen_users, user))
        if at < len(seen_users) and seen_users[at] == user:
            candidates = np.setdiff1d(candidates, graph.arrays["seen_items"][offsets[at]:offsets[at + 1]])
    user_rows = np.full(len(candidates), users.encode([user])[0], np.int32)
    logits = graph(user_rows, items.encode(candidates).astype(np.int32)).reshape(-1)
    best = np.lexsort((candidates, -logits))[:args.top]  # best first; ties by item id
    return [{"item": candidates[i].item(), "probability": _sigmoid(logits[i])} for i in best]


def click(graph: Graph, value: str, args: argparse.Namespace) -> dict:
    from ..tasks.recommender.ids import IdMap, ctr_features

    if "users" not in graph.meta:
        raise UserError("this model was trained on a TSV feature file: feed its int32 feature rows to the graph")
    user, item, *rest = [part.strip() for part in value.split(",")]
    user_id, item_id = (_raw_id(IdMap.from_meta(graph.meta[f"{kind}s"]), raw, kind)
                        for kind, raw in (("user", user), ("item", item)))
    side_names = [feature["name"] for feature in graph.meta.get("side", [])]
    if len(rest) < len(side_names):
        raise UserError(f"{value!r}: expected user,item,{','.join(side_names)}[,genre...] (the side features "
                        "the model was trained with)")
    side = {f["name"]: np.array([_number(v, f["name"]) if f["numeric"] else v])
            for v, f in zip(rest, graph.meta.get("side", []))} if side_names else None
    genres = rest[len(side_names):]
    if not genres:  # the item's own, as in training
        if "item_genres" not in graph.meta:
            raise UserError(f"{graph.name}.json has no item genres (an export before they were kept): export "
                            "again, or give them: user,item,genre...")
        genres = graph.meta["item_genres"][str(item_id)]
    if unknown := [g for g in genres if g not in graph.meta["genres"]]:
        raise UserError(f"genre {unknown[0]!r}: not one of the training genres ({', '.join(graph.meta['genres'])})")
    features = ctr_features(graph.meta, [user_id], [item_id], {item_id: genres}, side)
    return {"user": user_id, "item": item_id, "genres": genres, **({"side": rest[:len(side_names)]} if side else {}),
            "probability": _sigmoid(graph(features).reshape(-1)[0])}


def embed_image(graph: Graph, value: str, args: argparse.Namespace) -> list[float]:
    from ..images.decode import eval_view

    return graph(eval_view(Path(value), graph.meta)[None])[0].tolist()


def embed_text(graph: Graph, value: str, args: argparse.Namespace) -> list[float]:
    from ..tasks.multimodal.captions import check_known, encode

    check_known([value], graph.meta)  # as retrieve.py: a caption of unknown words only is refused

    return graph(encode([value], graph.meta))[0].tolist()


def continue_text(graph: Graph, value: str, args: argparse.Namespace) -> str:
    from ..tasks.nlp.data.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_meta(graph.meta)
    ids, block = list(tokenizer.encode(value)), graph.meta["block_size"]
    if not ids:
        raise UserError("the text has no tokens")
    for _ in range(args.tokens):
        context = ids[-block:]
        window = np.zeros((1, block), np.int32)
        window[0, :len(context)] = context  # padded on the right: causal attention never sees it
        ids.append(int(graph(window)[0, len(context) - 1, :tokenizer.vocab_size].argmax()))  # padding rows: never
    return tokenizer.decode(ids)


TASKS = {"classifier": classify, "scorer": recommend, "ctr_model": click, "image_encoder": embed_image,
         "text_encoder": embed_text, "lm": continue_text}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="predict", description="Run an exported ONNX network without MindSpore.")
    p.add_argument("--onnx", required=True, type=Path, help="an export/<name>.onnx written by export.py")
    p.add_argument("input", help="an image file, a user id, user,item[,genres], a caption or a text (see --onnx)")
    p.add_argument("--top", type=int, default=5, help="classes or items to list (default: %(default)s)")
    p.add_argument("--tokens", type=int, default=20, help="lm: new tokens to generate (default: %(default)s)")
    p.add_argument("--include-seen", action="store_true",
                   help="scorer: rank the items the user has interacted with too (default: left out)")
    args = p.parse_args(argv)
    try:
        graph = Graph(args.onnx)
        if graph.name not in TASKS:
            raise UserError(f"{args.onnx}: no predict for a network named {graph.name!r} (one of {', '.join(TASKS)})")
        result = TASKS[graph.name](graph, args.input, args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=None if graph.name.endswith("encoder") else 2, ensure_ascii=False))
    return 0


def _raw_id(ids, text: str, kind: str):
    """``text`` as a raw id of ``ids`` (an ``IdMap``: integer or string ids), or one line if unknown."""
    raw = ids.parse(text)
    if raw is None:
        raise UserError(f"{kind} {text!r}: expected an integer (this model's {kind} ids are integers)")
    if raw not in ids:
        raise UserError(f"{kind} {text}: unknown (not in the training data)")
    return raw


def _number(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(f"{name} {text!r}: expected a number (a numeric side feature)") from None


def _sigmoid(logit) -> float:
    return float(1 / (1 + np.exp(-float(logit))))
