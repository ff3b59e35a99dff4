"""Weight import, checked against PyTorch: a torchvision-named ResNet-18 and a Hugging Face
GPT-2, with random weights, saved as safetensors, become checkpoints of generated vision and
nlp projects whose MindSpore networks compute the same logits."""

from __future__ import annotations

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
