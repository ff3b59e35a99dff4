"""An imported CLIP sees photos as its own processor prepares them, everywhere: retrieve.py, eval.py
and a fine-tune from it (transformers' CLIPImageProcessor and CLIPModel as the reference), and
scores zero-shot with a neutral prompt, not the digits' caption."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from helpers import generate
from test_weights import run, tiny_clip

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PIXELS = """
import sys
import numpy as np
from {package}.deploy.inference import load_trained
from {package}.images.files import predict_files

trained = load_trained(sys.argv[1])
print(trained.cfg.data.prompt)
np.save(sys.argv[3], predict_files(lambda x: x, [sys.argv[2]], trained.meta, np.arange(1), 1))
"""


def photo(path, size=(150, 97)):
    """A smooth RGB photo (gradients and a disc): resampling differences show, noise would hide them."""
    from PIL import Image

    y, x = np.mgrid[0 : size[1], 0 : size[0]] / np.array(size[::-1]).reshape(2, 1, 1)[::-1]
    disc = ((x - 0.6) ** 2 + (y - 0.4) ** 2 < 0.08).astype(float)
    rgb = np.stack([x, y, 0.5 * disc + 0.3 * (1 - x)], -1) * 255
    Image.fromarray(rgb.astype(np.uint8)).save(path)
    return path


@pytest.mark.slow
def test_an_imported_clip_prepares_photos_as_its_processor_and_prompts_neutrally(tmp_path):
    reference, tokenizer = tiny_clip(tmp_path / "clip")
    processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16}
    )
    processor.save_pretrained(tmp_path / "clip")
    project = generate(tmp_path, "multimodal", name="mm", git=False)
    converted = run(
        project, "convert_weights.py", str(tmp_path / "clip" / "model.safetensors"), "--out", "clip.ckpt"
    )
    assert converted.returncode == 0, converted.stderr[-2000:]

    # One preprocessing: the eval path (predict_files) equals the processor within 1/255 of a pixel.
    image = photo(tmp_path / "photo.png")
    (tmp_path / "pixels.py").write_text(PIXELS.format(package=project.name), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(project)}
    result = run(
        project, str(tmp_path / "pixels.py"), "clip.ckpt", str(image), str(tmp_path / "ours.npy"), env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "a photo of a {}."  # 0.8.4: "a handwritten digit {}"
    from PIL import Image

    expected = processor(images=Image.open(image), return_tensors="np")["pixel_values"]
    ours = np.load(tmp_path / "ours.npy")
    assert ours.shape == expected.shape == (1, 3, 16, 16)
    assert np.abs(ours - expected).max() <= 1.01 / 255 / min(processor.image_std)  # measured: 2.4e-7

    # retrieve.py scores the photo as CLIPModel does on the processor's pixels (0.8.4 squashed it).
    captions = ["a photo", "to a pho", "pho to"]
    (tmp_path / "captions.txt").write_text("\n".join(captions) + "\n", encoding="utf-8")
    found = run(
        project,
        "retrieve.py",
        "--checkpoint",
        "clip.ckpt",
        "--image",
        str(image),
        "--captions",
        str(tmp_path / "captions.txt"),
        "--top",
        "3",
    )
    assert found.returncode == 0, found.stderr[-2000:]
    scores = {line.split(maxsplit=1)[1]: float(line.split()[0]) for line in found.stdout.splitlines()}
    ids = tokenizer(captions, padding="max_length", max_length=16, return_tensors="pt").input_ids
    with torch.no_grad():
        out = reference(input_ids=ids, pixel_values=torch.from_numpy(expected))
    cosine = out.image_embeds @ out.text_embeds.T  # both unit vectors
    for caption, value in zip(captions, cosine[0].tolist(), strict=True):
        assert scores[caption] == pytest.approx(value, abs=2e-3), (caption, scores, value)

    # A fine-tune from it normalises with CLIP's mean/std, not the new photos' own.
    folder = tmp_path / "pairs"
    folder.mkdir()
    lines = []
    for i in range(8):
        photo(folder / f"{i}.png", (40 + 3 * i, 30))
        lines.append(json.dumps({"file_name": f"{i}.png", "text": f"a photo {i}"}))
    (folder / "metadata.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tuned = run(
        project,
        "train.py",
        "--set",
        "model.pretrained=clip.ckpt",
        "--set",
        f"data.path={folder}",
        "--set",
        "model.image_tower=vit",
        "--set",
        "model.text_tower=clip",
        "--set",
        "train.max_steps=1",
        "--set",
        "train.batch_size=4",
        "--set",
        "output.plot=false",
        *(
            a
            for item in (
                "embed_dim=16",
                "vit_patch_size=8",
                "vit_layers=2",
                "vit_heads=2",
                "vit_width=32",
                "text_width=32",
                "text_layers=2",
                "text_heads=2",
            )
            for a in ("--set", f"model.{item}")
        ),
        "--set",
        "data.image_size=16",
        "--set",
        "data.channels=3",
    )
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    run_dir = json.loads(tuned.stdout[tuned.stdout.index("{\n") :])["run_dir"]
    (tmp_path / "meta.py").write_text(
        f"from {project.name}.engine import checkpoint\nimport json, sys\n"
        "print(json.dumps(checkpoint.read(sys.argv[1])[1]['task_meta']))\n",
        encoding="utf-8",
    )
    meta = run(project, str(tmp_path / "meta.py"), f"{run_dir}/last.ckpt", env=env)
    assert meta.returncode == 0, meta.stderr[-2000:]
    task_meta = json.loads(meta.stdout.strip().splitlines()[-1])
    assert task_meta["mean"] == pytest.approx(processor.image_mean) and task_meta["std"] == pytest.approx(
        processor.image_std
    )
    assert task_meta["interpolation"] == "bicubic"
