"""Weight import, checked against PyTorch: a torchvision-named ResNet-18 and a Hugging Face
GPT-2, with random weights, saved as safetensors, become checkpoints of generated vision and
nlp projects whose MindSpore networks compute the same logits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import generate

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")
nn = torch.nn


class BasicBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x):
        out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """torchvision.models.resnet18, written out (torchvision's wheel does not load here)."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths, in_ch = (64, 128, 256, 512), 64
        for i, width in enumerate(widths, start=1):
            stride = 1 if i == 1 else 2
            setattr(
                self,
                f"layer{i}",
                nn.Sequential(BasicBlock(in_ch, width, stride), BasicBlock(width, width, 1)),
            )
            in_ch = width
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def random_resnet18(path) -> ResNet18:
    """Random weights *and* BatchNorm statistics (the defaults 1/0 would hide a swapped mapping)."""
    torch.manual_seed(0)
    model = ResNet18()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
                module.num_batches_tracked.fill_(100)
    safetensors_torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model.eval()


def run(project, *args, env=None):
    return subprocess.run(
        [sys.executable, *args], cwd=project, capture_output=True, text=True, timeout=600, env=env
    )


MINDSPORE_LOGITS = """
import sys
import numpy as np
from mindspore import Tensor
from {package}.deploy.inference import load_trained

trained = load_trained(sys.argv[1])
np.save(sys.argv[3], trained.network(Tensor(np.load(sys.argv[2]))).asnumpy())
"""


def mindspore_logits(project, tmp_path, checkpoint: str, inputs: np.ndarray) -> np.ndarray:
    """The converted network's output for ``inputs``, computed in the project's own package."""
    np.save(tmp_path / "inputs.npy", inputs)
    (tmp_path / "logits.py").write_text(MINDSPORE_LOGITS.format(package=project.name), encoding="utf-8")
    args = [str(tmp_path / "logits.py"), checkpoint, str(tmp_path / "inputs.npy"), str(tmp_path / "out.npy")]
    result = run(project, *args, env={**os.environ, "PYTHONPATH": str(project)})
    assert result.returncode == 0, result.stderr[-2000:]
    return np.load(tmp_path / "out.npy")


def onnx_outputs(project, checkpoint: str, out: str, feeds: dict[str, dict[str, np.ndarray]]) -> dict:
    """``export.py --format onnx`` of ``checkpoint`` into ``out``; each graph of ``feeds``
    ({name: {input: array}}) run by onnxruntime: {name: its first output}."""
    onnxruntime = pytest.importorskip("onnxruntime")
    exported = run(project, "export.py", "--checkpoint", checkpoint, "--format", "onnx", "--out", out)
    assert exported.returncode == 0, exported.stderr[-2000:]
    outputs = {}
    for name, inputs in feeds.items():
        spec = json.loads((project / out / f"{name}.json").read_text(encoding="utf-8"))
        assert spec["onnx"]["max_abs_diff"] <= 1e-4  # export.py's own check against MindSpore
        graph = str(project / out / f"{name}.onnx")
        session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
        outputs[name] = session.run(None, inputs)[0]
    return outputs


def test_torchvision_resnet18_converts_to_the_same_logits(tmp_path):
    project = generate(tmp_path, "vision", name="weights", git=False)
    src = tmp_path / "resnet18.safetensors"
    reference = random_resnet18(src)

    converted = run(project, "convert_weights.py", str(src), "--out", "imported.ckpt", "--verify")
    assert converted.returncode == 0, converted.stderr[-2000:]
    assert "resnet18, 1000 classes -> imported.ckpt, max |logit diff| vs PyTorch" in converted.stdout

    images = np.random.default_rng(1).standard_normal((2, 3, 96, 96)).astype(np.float32)
    actual = mindspore_logits(project, tmp_path, "imported.ckpt", images)
    with torch.no_grad():
        expected = reference(torch.from_numpy(images)).numpy()
    assert actual.shape == (2, 1000)
    assert np.abs(actual - expected).max() <= 1e-4 * np.abs(expected).max()

    # Import -> ONNX: onnxruntime gives PyTorch's logits (the export's batch is 1, its size the meta's).
    image = np.random.default_rng(2).standard_normal((1, 3, 224, 224)).astype(np.float32)
    logits = onnx_outputs(project, "imported.ckpt", "export", {"classifier": {"x": image}})["classifier"]
    with torch.no_grad():
        expected = reference(torch.from_numpy(image)).numpy()
    assert np.abs(logits - expected).max() <= 1e-4 * np.abs(expected).max()


def test_wrong_files_are_refused_with_one_line_and_nothing_written(tmp_path):
    project = generate(tmp_path, "vision", name="weights", git=False)
    src = tmp_path / "resnet18.safetensors"
    random_resnet18(src)
    state = safetensors_torch.load_file(str(src))
    wrong_shape = tmp_path / "wrong_shape.safetensors"
    safetensors_torch.save_file(
        {**state, "fc.weight": state["fc.weight"][:, :256].contiguous()}, str(wrong_shape)
    )
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(src.read_bytes()[:100_000])
    blocks_torch = tmp_path / "notorch"
    (blocks_torch / "torch").mkdir(parents=True)
    (blocks_torch / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    cases = [
        (wrong_shape, [], None, "tensor 'fc.weight' has shape (1000, 256); head.weight needs (1000, 512)"),
        (truncated, [], None, "is not a readable .safetensors file"),
        (src, ["--verify"], {**os.environ, "PYTHONPATH": str(blocks_torch)}, "--verify needs PyTorch"),
    ]
    for path, extra, env, message in cases:
        result = run(project, "convert_weights.py", str(path), "--out", "out.ckpt", *extra, env=env)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and message in lines[0], result.stderr[-2000:]
        assert not (project / "out.ckpt").exists()


def tiny_gpt2(path, vocab_size: int = 256):
    """A random Hugging Face GPT-2, written as ``save_pretrained`` does (model.safetensors + config.json)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=vocab_size, n_positions=32, n_embd=64, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # LayerNorms off their 1/0 defaults, so a swapped gamma/beta would show
        for name, param in model.named_parameters():
            if "ln_" in name and name.endswith("weight"):
                param.uniform_(0.5, 1.5)
            elif "ln_" in name:
                param.uniform_(-0.2, 0.2)
    model.save_pretrained(path)
    return model


def test_huggingface_gpt2_converts_to_the_same_logits(tmp_path):
    reference = tiny_gpt2(tmp_path / "gpt2")
    project = generate(tmp_path, "nlp", name="lm", git=False)
    src = tmp_path / "gpt2" / "model.safetensors"
    converted = run(project, "convert_weights.py", str(src), "--out", "gpt2.ckpt", "--verify")
    assert converted.returncode == 0, converted.stderr[-2000:]
    assert "gpt2, 2 layers x 64 -> gpt2.ckpt, max |logit diff| vs transformers" in converted.stdout

    tokens = np.random.default_rng(1).integers(0, 256, (2, 32)).astype(np.int32)
    actual = mindspore_logits(project, tmp_path, "gpt2.ckpt", tokens)
    with torch.no_grad():
        expected = reference(torch.from_numpy(tokens).long()).logits.numpy()
    assert actual.shape == (2, 32, 256)
    assert np.abs(actual - expected).max() <= 1e-4 * np.abs(expected).max()


def test_a_bpe_vocabulary_gpt2_needs_its_tokenizer_json(tmp_path):
    """Refused with one line without its tokenizer.json; with one of the same size beside the
    file (as Hugging Face ships GPT-2), it converts and --verify finds the same logits."""
    tokenizers = pytest.importorskip("tokenizers")
    reference = tiny_gpt2(tmp_path / "gpt2", vocab_size=512)
    project = generate(tmp_path, "nlp", name="lm", git=False)
    src = str(tmp_path / "gpt2" / "model.safetensors")
    result = run(project, "convert_weights.py", src, "--out", "x.ckpt")
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and "a vocabulary of 512 tokens" in lines[0]
    assert not (project / "x.ckpt").exists()

    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(
        [
            "the quick brown fox jumps over the lazy dog; " * 50,
            (tmp_path / "gpt2" / "config.json").read_text(),
        ]
        * 20,
        trainer=trainer,
    )
    bpe.add_tokens([f"<pad{i}>" for i in range(512 - bpe.get_vocab_size())])  # exactly the embedding's rows
    bpe.save(str(tmp_path / "gpt2" / "tokenizer.json"))
    converted = run(project, "convert_weights.py", src, "--out", "gpt2.ckpt", "--verify")
    assert converted.returncode == 0, converted.stderr[-2000:]
    tokens = np.random.default_rng(1).integers(0, 512, (2, 32)).astype(np.int32)
    actual = mindspore_logits(project, tmp_path, "gpt2.ckpt", tokens)
    with torch.no_grad():
        expected = reference(torch.from_numpy(tokens).long()).logits.numpy()
    assert actual.shape == (2, 32, 512) and np.abs(actual - expected).max() <= 1e-4 * np.abs(expected).max()


def tiny_vit(path, layers: int = 2):
    """A random Hugging Face ViTForImageClassification at vit_tiny's width (192), 2 blocks, 32x32
    images in 8x8 patches, saved as ``save_pretrained`` does; LayerNorms off their 1/0 defaults."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.ViTConfig(
        hidden_size=192,
        num_hidden_layers=layers,
        num_attention_heads=3,
        intermediate_size=384,
        image_size=32,
        patch_size=8,
        num_channels=3,
        num_labels=10,
    )
    model = transformers.ViTForImageClassification(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layernorm" in name:
                param.uniform_(0.5, 1.5) if name.endswith("weight") else param.uniform_(-0.2, 0.2)
            elif name.endswith(("cls_token", "position_embeddings")):
                param.normal_(0, 0.5)  # HF initialises the class token to zeros
    model.save_pretrained(path)
    return model


def torchvision_names(hf: dict) -> dict:
    """A Hugging Face ViT file's tensors under torchvision's VisionTransformer names (written out
    here from torchvision's module tree, independently of the project's table)."""
    out = {
        "conv_proj.weight": hf["vit.embeddings.patch_embeddings.projection.weight"],
        "conv_proj.bias": hf["vit.embeddings.patch_embeddings.projection.bias"],
        "class_token": hf["vit.embeddings.cls_token"],
        "encoder.pos_embedding": hf["vit.embeddings.position_embeddings"],
        "encoder.ln.weight": hf["vit.layernorm.weight"],
        "encoder.ln.bias": hf["vit.layernorm.bias"],
        "heads.head.weight": hf["classifier.weight"],
        "heads.head.bias": hf["classifier.bias"],
    }
    for i in range(len({k.split(".")[3] for k in hf if k.startswith("vit.encoder.layer.")})):
        h, t = f"vit.encoder.layer.{i}.", f"encoder.layers.encoder_layer_{i}."
        for leaf in ("weight", "bias"):
            q, k, v = (hf[f"{h}attention.attention.{n}.{leaf}"] for n in ("query", "key", "value"))
            out[f"{t}self_attention.in_proj_{leaf}"] = torch.cat([q, k, v])
            out[f"{t}self_attention.out_proj.{leaf}"] = hf[f"{h}attention.output.dense.{leaf}"]
            out[f"{t}ln_1.{leaf}"] = hf[f"{h}layernorm_before.{leaf}"]
            out[f"{t}ln_2.{leaf}"] = hf[f"{h}layernorm_after.{leaf}"]
            out[f"{t}mlp.0.{leaf}"] = hf[f"{h}intermediate.dense.{leaf}"]
            out[f"{t}mlp.3.{leaf}"] = hf[f"{h}output.dense.{leaf}"]
    return {name: value.contiguous() for name, value in out.items()}


def test_vit_converts_to_the_same_logits_as_transformers(tmp_path):
    """Both layouts of one random ViT: the Hugging Face file (beside its config.json) and the
    same tensors under torchvision's names; each converts with --verify and computes
    transformers' logits."""
    reference = tiny_vit(tmp_path / "hf_vit")
    torchvision_file = tmp_path / "vit_tv.safetensors"
    published = safetensors_torch.load_file(
        str(tmp_path / "hf_vit" / "model.safetensors")
    )  # the file's names
    safetensors_torch.save_file(torchvision_names(published), str(torchvision_file))
    project = generate(tmp_path, "vision", name="vit", git=False)
    images = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = reference(pixel_values=torch.from_numpy(images)).logits.numpy()
    for src, out in [(tmp_path / "hf_vit" / "model.safetensors", "hf.ckpt"), (torchvision_file, "tv.ckpt")]:
        converted = run(project, "convert_weights.py", str(src), "--out", out, "--verify", "--heads", "3")
        assert converted.returncode == 0, converted.stderr[-2000:]
        assert f"vit_tiny, 10 classes -> {out}, max |logit diff| vs PyTorch" in converted.stdout
        actual = mindspore_logits(project, tmp_path, out, images)
        # measured: max |diff| 5.1e-7 (--verify, HF file)
        assert actual.shape == (2, 10) and np.abs(actual - expected).max() <= 1e-4 * np.abs(expected).max()
    # Import -> ONNX (exact GELU rewritten for the exporter): onnxruntime gives transformers' logits.
    logits = onnx_outputs(project, "hf.ckpt", "export", {"classifier": {"x": images[:1]}})["classifier"]
    assert np.abs(logits - expected[:1]).max() <= 1e-4 * np.abs(expected).max()


def tiny_clip(path):
    """A random Hugging Face CLIPModel (both towers 2 blocks x 32, 16x16 images in 8x8 patches, a
    16-token context) saved as ``save_pretrained`` does, with a CLIP BPE tokenizer.json of exactly
    its 517 tokens (bytes, bytes + </w>, three merges, the two specials) beside it."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import pre_tokenizers

    chars = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = [*chars, *(c + "</w>" for c in chars), "ph", "pho", "to</w>", "<|startoftext|>", "<|endoftext|>"]
    path.mkdir()
    (path / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}), encoding="utf-8")
    (path / "merges.txt").write_text("#version: 0.2\np h\nph o\nt o</w>\n", encoding="utf-8")
    transformers.CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt")).save_pretrained(path)
    torch.manual_seed(0)
    config = transformers.CLIPConfig(
        projection_dim=16,
        text_config={
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 128,
            "vocab_size": len(vocab),
            "max_position_embeddings": 16,
            "eos_token_id": len(vocab) - 1,
        },
        vision_config={
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 128,
            "image_size": 16,
            "patch_size": 8,
        },
    )
    model = transformers.CLIPModel(config).eval()
    with torch.no_grad():  # LayerNorms off their 1/0 defaults; a temperature that is not the default
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5) if name.endswith("weight") else param.uniform_(-0.2, 0.2)
        model.logit_scale.fill_(2.0)
    model.save_pretrained(path)
    return model, transformers.CLIPTokenizer.from_pretrained(path)


CLIP_EMBEDDINGS = """
import sys
import numpy as np
from mindspore import Tensor
from {package}.deploy.inference import load_trained
from {package}.tasks.multimodal.data import encode

trained = load_trained(sys.argv[1])
captions = Tensor(encode(["a photo", "to a pho"], trained.meta))
image, text = trained.network(Tensor(np.load(sys.argv[2])), captions)
np.savez(sys.argv[3], image=image.asnumpy(), text=text.asnumpy(), scale=trained.network.scale().asnumpy())
"""


def test_huggingface_clip_converts_to_the_same_embeddings_and_zero_shot_runs(tmp_path):
    reference, tokenizer = tiny_clip(tmp_path / "clip")
    project = generate(tmp_path, "multimodal", name="mm", git=False)
    src = str(tmp_path / "clip" / "model.safetensors")
    converted = run(project, "convert_weights.py", src, "--out", "clip.ckpt", "--verify")
    assert converted.returncode == 0, converted.stderr[-2000:]
    assert (
        "CLIP, ViT 2 x 32, text 2 x 32, embed 16 -> clip.ckpt, max |diff| vs transformers" in converted.stdout
    )

    images = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "images.npy", images)
    (tmp_path / "emb.py").write_text(CLIP_EMBEDDINGS.format(package=project.name), encoding="utf-8")
    result = run(
        project,
        str(tmp_path / "emb.py"),
        "clip.ckpt",
        str(tmp_path / "images.npy"),
        str(tmp_path / "o.npz"),
        env={**os.environ, "PYTHONPATH": str(project)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    ours = np.load(tmp_path / "o.npz")
    ids = tokenizer(
        ["a photo", "to a pho"], padding="max_length", max_length=16, return_tensors="pt"
    ).input_ids
    with torch.no_grad():
        expected = reference(input_ids=ids, pixel_values=torch.from_numpy(images))
    # measured (--verify): image 1.8e-7, text 1.6e-7, logits 1.2e-6
    assert np.abs(ours["image"] - expected.image_embeds.numpy()).max() <= 1e-5
    assert np.abs(ours["text"] - expected.text_embeds.numpy()).max() <= 1e-5
    logits = float(ours["scale"]) * ours["image"] @ ours["text"].T
    assert np.abs(logits - expected.logits_per_image.numpy()).max() <= 1e-4

    # Import -> ONNX: both towers in onnxruntime give transformers' embeddings.
    feeds = {"image_encoder": {"x": images[:1]}, "text_encoder": {"x": ids[:1].numpy().astype(np.int32)}}
    towers = onnx_outputs(project, "clip.ckpt", "export", feeds)
    assert np.abs(towers["image_encoder"] - expected.image_embeds.numpy()[:1]).max() <= 1e-5
    assert np.abs(towers["text_encoder"] - expected.text_embeds.numpy()[:1]).max() <= 1e-5

    # Zero-shot and retrieval from the imported weights, no training: a labelled folder of ten images.
    from PIL import Image

    folder = tmp_path / "pairs"
    folder.mkdir()
    lines = []
    for i in range(10):
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(
            folder / f"{i}.png"
        )
        lines.append(
            json.dumps({"file_name": f"{i}.png", "text": f"a photo {i}", "label": "pho" if i % 2 else "to"})
        )
    (folder / "metadata.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    evaluated = run(
        project,
        "eval.py",
        "--checkpoint",
        "clip.ckpt",
        "--set",
        f"data.path={folder}",
        "--set",
        "data.prompt=a {}",
        "--set",
        "data.eval_fraction=0.5",
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    metrics = json.loads(evaluated.stdout)
    assert {"zero_shot_acc", "i2t_r1", "t2i_r1"} <= set(metrics) and metrics[
        "examples"
    ] >= 4  # held-out images


def test_a_clip_file_of_another_kind_is_refused_with_one_line(tmp_path):
    reference, _ = tiny_clip(tmp_path / "clip")
    project = generate(tmp_path, "multimodal", name="mm", git=False)
    state = safetensors_torch.load_file(str(tmp_path / "clip" / "model.safetensors"))
    vit = tmp_path / "vit.safetensors"  # a vision file
    safetensors_torch.save_file({"conv_proj.weight": torch.zeros(8, 3, 4, 4)}, str(vit))
    wide = tmp_path / "clip" / "wide.safetensors"  # another size of one tensor
    safetensors_torch.save_file({**state, "text_projection.weight": torch.zeros(16, 48)}, str(wide))
    cases = [
        (
            vit,
            "missing tensor 'vision_model.embeddings.patch_embedding.weight': not a Hugging Face CLIPModel",
        ),
        (wide, "tensor 'text_projection.weight' has shape (16, 48)"),
    ]
    for path, message in cases:
        result = run(project, "convert_weights.py", str(path), "--out", "out.ckpt")
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and message in lines[0], result.stderr[-2000:]
        assert not (project / "out.ckpt").exists()
