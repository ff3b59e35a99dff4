"""The Llama-family layouts people fine-tune, imported with ``convert_weights.py --verify``:
tiny random models carrying each published config's quirks (sizes shrunk, everything else as
released), saved by transformers' own ``save_pretrained``, must give transformers' logits."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
from helpers import generate
from test_weights import mindspore_logits, onnx_outputs, run

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
peft = pytest.importorskip("peft")

TOKENS = 320  # the tokenizer's; an embedding may have more rows (Qwen2.5 pads them)
SIZES = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
             eos_token_id=2)
# The registry (the project's tasks/nlp/layouts/): row -> (config class, model class, config values
# as the published checkpoints have them, sizes shrunk; windows, scaled contexts and layer
# patterns short enough to act within the 64 positions --verify compares)
LAYOUTS = {
    # SmolLM2: plain Llama (bf16 weights, tied head, rope_theta 1e5, eps 1e-5)
    "smollm2": ("LlamaConfig", "LlamaForCausalLM", dict(rope_theta=1e5, rms_norm_eps=1e-5, vocab_size=TOKENS,
                                                         tie_word_embeddings=True)),
    # Llama with attention_bias (q, k, v and o) and mlp_bias
    "llama-bias": ("LlamaConfig", "LlamaForCausalLM", dict(vocab_size=TOKENS, attention_bias=True,
                                                            mlp_bias=True)),
    # Qwen2.5: 151,936 embedding rows for 151,665 tokens; a window set but not used; q/k/v biases
    "qwen2.5": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        vocab_size=TOKENS + 16, tie_word_embeddings=True, rope_theta=1e6, use_sliding_window=False,
        sliding_window=32, max_window_layers=1)),
    # Llama-3.2: llama3 RoPE scaling (an original context short enough that all three bands occur)
    "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(
        vocab_size=TOKENS, rope_theta=5e5, rms_norm_eps=1e-5, tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 256})),
    # Qwen3: per-head q/k RMSNorm, head_dim 32 != hidden / heads = 16
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        vocab_size=TOKENS, head_dim=32, tie_word_embeddings=True, rope_theta=1e6)),
    # Qwen3 with yarn RoPE (Qwen's long-context recipe)
    "qwen3-yarn": ("Qwen3Config", "Qwen3ForCausalLM", dict(vocab_size=TOKENS, head_dim=32, rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 1e6})),
    # Mistral: no window (v0.2+), head_dim written out
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(
        vocab_size=TOKENS, head_dim=16, sliding_window=None, rope_theta=1e6)),
    # Mistral v0.1: a sliding window in every layer
    "mistral-window": ("MistralConfig", "MistralForCausalLM", dict(vocab_size=TOKENS, sliding_window=12)),
    # Gemma-2: sandwich norms of 1 + weight, sqrt(d) embeddings, tanh GELU, query_pre_attn_scalar,
    # soft-capped scores and logits, a window in every other layer
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
        vocab_size=TOKENS, head_dim=32, query_pre_attn_scalar=24, sliding_window=12,
        attn_logit_softcapping=5.0, final_logit_softcapping=3.0)),
    # Gemma-3 (text): per-head q/k norms, local layers' own RoPE base, the global ones' linear scaling
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        vocab_size=TOKENS, head_dim=32, query_pre_attn_scalar=24, sliding_window=12, sliding_window_pattern=2,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})),
    # Phi-4-mini: fused qkv_proj and gate_up_proj, RoPE on 3/4 of each head, longrope (long factors
    # past the original context)
    "phi4-mini": ("Phi3Config", "Phi3ForCausalLM", dict(
        vocab_size=TOKENS, max_position_embeddings=128, original_max_position_embeddings=32,
        rope_parameters={"rope_type": "longrope", "rope_theta": 1e4, "partial_rotary_factor": 0.75,
                         "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                         "long_factor": [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]})),
    # OLMo-2: norms after each block, q/k norms across heads
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(vocab_size=TOKENS)),
    # SmolLM3: no RoPE in every no_rope_layer_interval-th layer
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(vocab_size=TOKENS, no_rope_layer_interval=2)),
    # GLM-4: sandwich norms, fused gate_up_proj, q/k/v biases, interleaved RoPE on half of each head
    "glm4": ("Glm4Config", "Glm4ForCausalLM", dict(vocab_size=TOKENS, head_dim=16)),
    # Granite-3: embedding, residual, attention and logit multipliers
    "granite3": ("GraniteConfig", "GraniteForCausalLM", dict(
        vocab_size=TOKENS, embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0625,
        logits_scaling=8.0)),
}


def bpe_tokenizer(path) -> None:
    """A byte-level BPE tokenizer.json of exactly ``TOKENS`` tokens, with Qwen's chat specials."""
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=TOKENS, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(["the quick brown fox jumps over the lazy dog; " * 50] * 20, trainer=trainer)
    bpe.add_tokens([f"<pad{i}>" for i in range(TOKENS - bpe.get_vocab_size())])
    bpe.save(str(path / "tokenizer.json"))


# as Qwen2.5-Instruct ships it: bos/pad ids and a repetition penalty beside the sampling defaults
GENERATION_CONFIG = {"bos_token_id": 1, "pad_token_id": 2, "eos_token_id": [0, 2], "do_sample": True,
                     "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}


def hf_folder(path, kind: str, dtype=torch.float32, **sizes):
    """A random model of ``kind`` written by ``save_pretrained`` in shards, norms and biases off
    their 1s and 0s (a swapped name would show), with tokenizer and generation files."""
    config_class, model_class, values = LAYOUTS[kind]
    config = getattr(transformers, config_class)(**{**SIZES, **values, **sizes})
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.uniform_(-0.2, 0.2)
    model.to(dtype).save_pretrained(path, max_shard_size="100KB")  # several shards + the index
    bpe_tokenizer(path)
    chat = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    settings = {"eos_token": "<|im_end|>", "chat_template": chat}
    (path / "tokenizer_config.json").write_text(json.dumps(settings))
    (path / "generation_config.json").write_text(json.dumps(
        GENERATION_CONFIG))
    return model.float().eval()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("layouts"), "nlp", name="lm", git=False)


JOURNEY = """
import json
import sys

import mindspore as ms
import numpy as np
from {package}.deploy.export import export_checkpoint
from {package}.deploy.inference import load_trained
from {package}.run.train import train
from {package}.tasks import load_config
from {package}.tasks.nlp.convert_weights import convert

folder, work = sys.argv[1:]
summary = convert(folder, f"{{work}}/imported.ckpt")  # --verify's comparison: the test's, in its process
sets = [f"model.pretrained={{work}}/imported.ckpt", "model.lora.rank=4", "model.lora.alpha=8.0",
        "model.lora.targets=[q_proj, v_proj, o_proj, up_proj, down_proj]", f"data.path={{work}}/chat.jsonl",
        "train.max_steps=2", "train.batch_size=4", "train.jit=false", "optim.lr=0.05", "optim.warmup_steps=0",
        "eval.max_examples=4",
        f"output.dir={{work}}/runs", "output.plot=false"]
best = f"{{train(load_config('config/config.yaml', sets))['run_dir']}}/best.ckpt"
for fmt in ("hf", "peft"):
    export_checkpoint(best, f"{{work}}/{{fmt}}", formats=(fmt,))
tokens = ms.Tensor(np.load(f"{{work}}/tokens.npy"))
for name, path in (("imported", f"{{work}}/imported.ckpt"), ("tuned", best)):
    np.save(f"{{work}}/{{name}}.npy", load_trained(path).network(tokens).asnumpy())
print(json.dumps(summary))
"""


@pytest.mark.parametrize("kind", list(LAYOUTS))
def test_each_family_imports_fine_tunes_and_exports_with_transformers_logits(project, tmp_path, kind):
    """The registry, row by row, as a user goes: ``convert_weights.py`` with ``--verify``'s check
    (transformers' logits over the whole 64-token context, past every window), a LoRA fine-tune
    on chat data (eager: compiled equals eager elsewhere), ``export.py --format hf`` reloaded by
    transformers and ``--format peft`` by PEFT over the original folder, each with the
    fine-tune's logits (which moved off the base's). A new family is a row of LAYOUTS."""
    reference = hf_folder(tmp_path / kind, kind, torch.bfloat16 if kind == "smollm2" else torch.float32)
    turns = [{"role": "user", "content": "Where does the fox jump?"},
             {"role": "assistant", "content": "Over the lazy dog."}]
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps({"messages": turns}) + "\n" for _ in range(16)))
    tokens = np.random.default_rng(1).integers(0, TOKENS, (2, 64)).astype(np.int32)
    np.save(tmp_path / "tokens.npy", tokens)
    (tmp_path / "journey.py").write_text(JOURNEY.format(package=project.name), encoding="utf-8")
    result = run(project, str(tmp_path / "journey.py"), str(tmp_path / kind), str(tmp_path),
                 env={**os.environ, "PYTHONPATH": str(project)})
    assert result.returncode == 0, result.stderr[-3000:]

    def close(ours, theirs):
        return np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()

    with torch.no_grad():
        base = reference(torch.from_numpy(tokens).long()).logits.numpy()
        exported = load_hf(tmp_path / "hf")(torch.from_numpy(tokens).long()).logits.numpy()
        adapted = peft.PeftModel.from_pretrained(load_hf(tmp_path / kind), str(tmp_path / "peft")).eval()
        adapted = adapted(torch.from_numpy(tokens).long()).logits.numpy()
    imported, tuned = np.load(tmp_path / "imported.npy"), np.load(tmp_path / "tuned.npy")
    assert imported.shape == (2, 64, LAYOUTS[kind][2]["vocab_size"]) and close(imported, base)
    assert not close(tuned, base)  # the fine-tune moved the model...
    assert close(exported, tuned) and close(adapted, tuned)  # ...and both exports carry it


ROPE = """
import json
import sys

from {package}.tasks.nlp.config import RopeScaling
from {package}.tasks.nlp.hf.layouts.base import rope_parameters, rope_scaling
from {package}.tasks.nlp.models.rope import inverse_frequencies

out = {{}}
for name, (config, context) in json.loads(sys.argv[1]).items():
    rope = rope_parameters(config)
    scaling = rope_scaling(rope, config)
    scaling = scaling and RopeScaling(**scaling)
    inv_freq, attention = inverse_frequencies(16, rope["rope_theta"], scaling, context)
    out[name] = [inv_freq.tolist(), attention]
print(json.dumps(out))
"""
# rope_type -> (rope_parameters, the sequence length transformers computes for)
ROPE_CASES = {
    "linear": ({"rope_type": "linear", "factor": 4.0}, 64),
    "llama3": ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32}, 64),
    "yarn": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}, 64),
    "yarn-mscale": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                     "mscale": 1.0, "mscale_all_dim": 0.5, "beta_fast": 16.0, "beta_slow": 2.0}, 64),
    "dynamic": ({"rope_type": "dynamic", "factor": 2.0}, 64),
    "longrope-short": ({"rope_type": "longrope", "original_max_position_embeddings": 32,
                        "short_factor": [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
                        "long_factor": [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]}, 32),
    "longrope-long": ({"rope_type": "longrope", "original_max_position_embeddings": 32,
                       "short_factor": [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
                       "long_factor": [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]}, 64),
}


def test_every_rope_type_is_transformers_rope_function(project, tmp_path):
    """Each rope_parameters as config.json carries it, read by the import and computed by the
    decoder's RoPE: transformers' ROPE_INIT_FUNCTIONS' frequencies and cos/sin factor."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    configs = {name: ({**SIZES, "hidden_size": 64, "max_position_embeddings": 64,
                       "rope_parameters": {**rope, "rope_theta": 1e4}}, context)
               for name, (rope, context) in ROPE_CASES.items()}
    (tmp_path / "rope.py").write_text(ROPE.format(package=project.name), encoding="utf-8")
    result = run(project, str(tmp_path / "rope.py"), json.dumps(configs),
                 env={**os.environ, "PYTHONPATH": str(project)})
    assert result.returncode == 0, result.stderr[-2000:]
    ours = json.loads(result.stdout)
    for name, (config, context) in configs.items():
        reference = transformers.LlamaConfig(**config)
        kind = config["rope_parameters"]["rope_type"]
        inv_freq, attention = ROPE_INIT_FUNCTIONS[kind](reference, "cpu", seq_len=context)
        np.testing.assert_allclose(ours[name][0], inv_freq.numpy(), rtol=1e-6, err_msg=name)
        assert ours[name][1] == pytest.approx(attention, rel=1e-6), name


def test_an_old_style_linear_rope_scaling_is_read_as_linear(project, tmp_path):
    """``rope_scaling: {type: linear}`` (before transformers 4.45 named it rope_type)."""
    folder = tmp_path / "linear"
    hf_folder(folder, "smollm2")
    config = json.loads((folder / "config.json").read_text())
    config.pop("rope_parameters", None)
    config.update(rope_theta=1e5, rope_scaling={"type": "linear", "factor": 4.0})
    (folder / "config.json").write_text(json.dumps(config))
    reference = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    assert reference.config.rope_parameters["rope_type"] == "linear"  # transformers reads it so too
    converted = run(project, "convert_weights.py", str(folder), "--out", "linear.ckpt", "--verify")
    assert converted.returncode == 0, converted.stderr[-2000:]


GRADIENTS = """
import sys
import mindspore as ms
import numpy as np
from {package}.deploy.inference import load_trained
from {package}.tasks.nlp.loss import LanguageModelLoss

network = load_trained(sys.argv[1]).network
network.set_train(True)
params = network.trainable_params()
loss_net = LanguageModelLoss(network, summed=True)  # loss.normalize: token, the default: (sum, count)


def token_mean(tokens, mask):
    total, count = loss_net(tokens, mask)
    return total / count


grad = ms.value_and_grad(token_mean, None, params)
batch = np.load(sys.argv[2])
for mode, fn in (("jit", ms.jit(grad)), ("eager", grad)):
    loss, grads = fn(ms.Tensor(batch["tokens"]), ms.Tensor(batch["mask"]))
    named = {{p.name.removeprefix("network."): g.asnumpy() for p, g in zip(params, grads)}}
    np.savez(f"{{sys.argv[3]}}.{{mode}}.npz", loss=loss.asnumpy(), **named)
"""


def test_training_gradients_are_transformers_gradients(project, tmp_path, kind="qwen3"):
    """The gradients a chat fine-tune steps on (the mean over every masked token), compiled and
    eager, equal torch autograd's through transformers' model, parameter by parameter: the
    hand-written softmax backward, grouped-query attention and per-head q/k norms included."""
    reference = hf_folder(tmp_path / kind, kind)
    converted = run(project, "convert_weights.py", str(tmp_path / kind), "--out", f"grads-{kind}.ckpt")
    assert converted.returncode == 0, converted.stderr[-2000:]
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, TOKENS, (2, 33)).astype(np.int32)
    mask = (rng.random((2, 32)) < 0.5).astype(np.float32)
    np.savez(tmp_path / "batch.npz", tokens=tokens, mask=mask)
    (tmp_path / "grads.py").write_text(GRADIENTS.format(package=project.name), encoding="utf-8")
    result = run(project, str(tmp_path / "grads.py"), f"grads-{kind}.ckpt", str(tmp_path / "batch.npz"),
                 str(tmp_path / "grads"), env={**os.environ, "PYTHONPATH": str(project)})
    assert result.returncode == 0, result.stderr[-2000:]

    reference.train()
    logits = reference(torch.from_numpy(tokens[:, :-1]).long()).logits
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), torch.from_numpy(tokens[:, 1:]).long(),
                                               reduction="none")
    weights = torch.from_numpy(mask)
    loss = (losses * weights).sum() / weights.sum()  # as transformers' Trainer averages
    loss.backward()
    expected = {name: p.grad.numpy() for name, p in reference.named_parameters()}
    for mode in ("jit", "eager"):
        ours = np.load(tmp_path / f"grads.{mode}.npz")
        assert set(ours.files) - {"loss"} == set(expected)
        assert abs(float(ours["loss"]) - loss.item()) <= 1e-5 * loss.item()
        for name, grad in expected.items():
            assert np.abs(ours[name] - grad).max() <= 1e-4 * np.abs(grad).max() + 1e-7, (mode, name)


def exported_folder(project, source, out: str, *extra: str, fmt: str = "hf"):
    result = run(project, "export.py", "--checkpoint", source, "--format", fmt, "--out", out, *extra)
    assert result.returncode == 0, result.stderr[-2000:]
    return project / out


def load_hf(folder):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                                                    output_loading_info=True)
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    return model.eval()


@pytest.mark.parametrize("kind, dtype", [("smollm2", "bf16"), ("qwen3", "fp32")])
def test_import_then_hf_export_is_the_identity(project, tmp_path, kind, dtype):
    """Every tensor bit for bit in the original dtype; transformers loads the folder with no key
    missing or unexpected and computes the original model's logits."""
    from safetensors import safe_open

    source = tmp_path / kind
    reference = hf_folder(source, kind, torch.bfloat16 if dtype == "bf16" else torch.float32)
    assert run(project, "convert_weights.py", str(source), "--out", f"{kind}.ckpt").returncode == 0
    folder = exported_folder(project, f"{kind}.ckpt", f"hf-{kind}", "--dtype", dtype)
    original = {}
    for file in source.glob("*.safetensors"):
        with safe_open(str(file), framework="pt") as f:
            original.update({name: f.get_tensor(name) for name in f.keys()})
    exported = {}
    for file in folder.glob("*.safetensors"):
        with safe_open(str(file), framework="pt") as f:
            exported.update({name: f.get_tensor(name) for name in f.keys()})
    tied = reference.config.tie_word_embeddings
    assert set(exported) == {name for name in original if not (tied and name == "lm_head.weight")}
    for name, value in exported.items():
        assert value.dtype == original[name].dtype and torch.equal(value, original[name]), name
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == json.loads((source / "config.json").read_text())["architectures"]
    tokens = torch.from_numpy(np.random.default_rng(2).integers(0, TOKENS, (2, 32)))
    with torch.no_grad():  # both folders read by transformers alike: the same function
        assert torch.equal(load_hf(folder)(tokens).logits, load_hf(source)(tokens).logits)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    assert settings["chat_template"].startswith("{% for m in messages %}")
    assert settings["eos_token"] == "<|im_end|>"
    # as it was (0.11.0 dropped bos/pad and repetition_penalty)
    assert json.loads((folder / "generation_config.json").read_text()) == GENERATION_CONFIG
    # Reloaded in the dtype asked for, either way (0.10.1: transformers 5 read the import's own dtype key)
    other = {"bf16": "fp32", "fp32": "bf16"}[dtype]
    again = exported_folder(project, f"{kind}.ckpt", f"hf-{kind}-{other}", "--dtype", other)
    for asked, written in ((dtype, folder), (other, again)):
        loaded = transformers.AutoModelForCausalLM.from_pretrained(str(written))
        assert loaded.dtype == {"bf16": torch.bfloat16, "fp32": torch.float32}[asked], (asked, loaded.dtype)
    refused = run(project, "export.py", "--checkpoint", f"{kind}.ckpt", "--format", "hf",
                  "--out", f"hf-{kind}")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode != 0 and len(lines) == 1 and "exists" in lines[0]


def test_a_gpt_trained_here_exports_as_gpt2_with_our_logits(project, tmp_path):
    """``model.arch: gpt`` (no biases, tied head) has no original config: a GPT-2 one is written
    from our sizes, zero biases added, and transformers computes our logits."""
    bpe_tokenizer(tmp_path)
    (tmp_path / "text.txt").write_text("A fox ran over the hill and met a dog by the river.\n" * 60)
    files = f"data.path={tmp_path}/text.txt", f"data.tokenizer_file={tmp_path}/tokenizer.json"
    settings = [*files, "data.tokenizer=bpe",
                "model.n_layer=2", "model.d_model=64", "model.n_head=4", "model.block_size=32",
                "train.max_steps=2", "eval.max_examples=4", "output.dir=gpt_runs"]
    trained = run(project, "train.py", *(arg for setting in settings for arg in ("--set", setting)))
    assert trained.returncode == 0, trained.stderr[-2000:]
    checkpoint = str(next((project / "gpt_runs").glob("*/best.ckpt")).relative_to(project))
    result = run(project, "export.py", "--checkpoint", checkpoint, "--format", "hf", "--out", "gpt2_hf")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "config written from our sizes" in result.stdout
    reference = load_hf(project / "gpt2_hf")
    assert type(reference).__name__ == "GPT2LMHeadModel"
    tokens = np.random.default_rng(4).integers(0, TOKENS, (2, 32)).astype(np.int32)
    with torch.no_grad():
        expected = reference(torch.from_numpy(tokens).long()).logits.numpy()
    actual = mindspore_logits(project, tmp_path, checkpoint, tokens)
    assert np.abs(actual - expected).max() <= 1e-4 * np.abs(expected).max()
    with torch.no_grad():  # its generation_config.json names the tokenizer's end of text
        prompt = torch.from_numpy(tokens[:1, :8]).long()
        generated = reference.generate(prompt, max_new_tokens=4, do_sample=False)
    assert generated.shape[1] <= 12 and reference.generation_config.eos_token_id is not None


def test_generate_prompt_is_transformers_generate_of_the_tokenizers_ids(project, tmp_path):
    """``generate.py --prompt`` as typed, on a tokenizer that opens every text with a BOS (as
    Llama's do): greedy text equal to transformers' ``generate(**tokenizer(prompt))`` with the folder's
    generation_config.json (its repetition_penalty 1.05 applied, as transformers does). (Mistral's
    untied head: a tied random model only repeats its last token, BOS or not.)"""
    reference = hf_folder(tmp_path / "mistral", "mistral")
    bpe = tokenizers.Tokenizer.from_file(str(tmp_path / "mistral" / "tokenizer.json"))
    bpe.post_processor = tokenizers.processors.TemplateProcessing(
        single="<|im_start|> $A", special_tokens=[("<|im_start|>", bpe.token_to_id("<|im_start|>"))])
    bpe.save(str(tmp_path / "mistral" / "tokenizer.json"))
    converted = run(project, "convert_weights.py", str(tmp_path / "mistral"), "--out", "bos.ckpt")
    assert converted.returncode == 0, converted.stderr[-2000:]
    prompt = "the lazy fox"
    generated = run(project, "generate.py", "--checkpoint", "bos.ckpt", "--prompt", prompt,
                    "--temperature", "0", "--max-new-tokens", "12")
    assert generated.returncode == 0, generated.stderr[-2000:]
    folder = tmp_path / "mistral"
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    ids = tokenizer(prompt, return_tensors="pt")
    assert ids["input_ids"][0, 0] == bpe.token_to_id("<|im_start|>")  # the tokenizer adds its BOS
    with torch.no_grad():
        out = reference.generate(**ids, max_new_tokens=12, do_sample=False, eos_token_id=[0, 2],
                                 pad_token_id=0, repetition_penalty=GENERATION_CONFIG["repetition_penalty"])
    new = out[0, ids["input_ids"].shape[1]:].tolist()
    new = new[:-1] if new and new[-1] in (0, 2) else new  # the end of text is not printed
    prompt_ids = ids["input_ids"][0].tolist()
    expected = tokenizer.decode(prompt_ids + new)[len(tokenizer.decode(prompt_ids)):]
    assert generated.stdout == prompt + expected + "\n"


def test_generate_prompts_is_transformers_batched_greedy(project, tmp_path):
    """``generate.py --prompts FILE`` as typed: prompts of unequal length, decoded as one batch
    (left-padded), each completion equal to transformers' batched greedy ``generate`` with an
    attention mask (padding_side left), on Mistral with a window shorter than the texts."""
    folder = tmp_path / "mistral-window"
    reference = hf_folder(folder, "mistral-window")
    assert run(project, "convert_weights.py", str(folder), "--out", "batch.ckpt").returncode == 0
    prompts = ["the lazy fox", "over the quick brown dog; the fox jumps", "dog"]
    (tmp_path / "prompts.txt").write_text("\n".join(prompts) + "\n\n")
    # The repetition penalty off: transformers' would count the left padding as context
    generated = run(project, "generate.py", "--checkpoint", "batch.ckpt", "--prompts",
                    str(tmp_path / "prompts.txt"), "--temperature", "0", "--max-new-tokens", "16",
                    "--repetition-penalty", "1")
    assert generated.returncode == 0, generated.stderr[-2000:]
    ours = [json.loads(line) for line in generated.stdout.splitlines()]
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"),
                                                     pad_token="<|endoftext|>", padding_side="left")
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    assert len(set(batch["attention_mask"].sum(1).tolist())) == 3  # three lengths: real left padding
    with torch.no_grad():
        out = reference.generate(**batch, max_new_tokens=16, do_sample=False, eos_token_id=[0, 2],
                                 pad_token_id=0)
    assert len(ours) == len(prompts)  # the empty line is no prompt
    for row, prompt, mine in zip(out, prompts, ours, strict=True):
        new = row[batch["input_ids"].shape[1]:].tolist()
        new = new[:next((i for i, t in enumerate(new) if t in (0, 2)), len(new))]  # up to the end of text
        ids = tokenizer(prompt)["input_ids"]
        expected = tokenizer.decode(ids + new)[len(tokenizer.decode(ids)):]
        assert mine == {"prompt": prompt, "completion": expected}


def test_an_imported_llama_exports_to_onnx_with_transformers_logits(project, tmp_path):
    """Grouped-query attention with per-head q/k norms (Qwen3), run by onnxruntime; the padded
    window's real positions give transformers' logits."""
    reference = hf_folder(tmp_path / "qwen3", "qwen3")
    converted = run(project, "convert_weights.py", str(tmp_path / "qwen3"), "--out", "onnx.ckpt")
    assert converted.returncode == 0, converted.stderr[-2000:]
    tokens = np.zeros((1, 64), np.int32)
    tokens[0, :20] = np.random.default_rng(3).integers(0, TOKENS, 20)
    logits = onnx_outputs(project, "onnx.ckpt", "onnx_export", {"lm": {"tokens": tokens}})["lm"]
    with torch.no_grad():
        expected = reference(torch.from_numpy(tokens[:, :20]).long()).logits.numpy()
    assert np.abs(logits[:, :20] - expected).max() <= 1e-4 * np.abs(expected).max()


def test_a_lora_fine_tune_exports_merged_with_our_logits(project, tmp_path, monkeypatch):
    """The user's round trip: import, LoRA on a chat file with nothing restated that a file says
    (the README's command), answer a chat, export: transformers and PEFT give our logits. The
    context comes from the file and the checkpoint: every example trains whole (0.10.1: the
    config's toy 64 tokens, longer conversations cut or dropped)."""
    hf_folder(tmp_path / "qwen", "qwen2.5", max_position_embeddings=512)
    assert run(project, "convert_weights.py", str(tmp_path / "qwen"), "--out", "q.ckpt").returncode == 0
    again = run(project, "convert_weights.py", str(tmp_path / "qwen"), "--out", "q.ckpt")  # never overwritten
    assert again.returncode == 1 and again.stderr.strip() == (
        "error: --out q.ckpt exists: choose another path, or pass --force to replace it"), again.stderr
    turns = [{"from": "human", "value": "Where does the fox jump?"}, {"from": "gpt", "value": "Over it."}]
    long = [turns[0], {"from": "gpt", "value": "Over the lazy dog, then the fence, then home again. " * 6}]
    rows = [{"conversations": long if i % 4 == 0 else turns} for i in range(40)]
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    sets = ["model.pretrained=q.ckpt", "model.lora.rank=4", f"data.path={tmp_path / 'chat.jsonl'}",
            "model.lora.targets=[q_proj, k_proj, v_proj, o_proj]", "train.max_steps=3", "optim.lr=0.05",
            f"output.dir={tmp_path / 'runs'}", "output.plot=false"]
    trained = run(project, "train.py", *(arg for value in sets for arg in ("--set", value)))
    assert trained.returncode == 0, trained.stderr[-2000:]
    [line] = [line for line in trained.stdout.splitlines() if line.startswith("data: model.block_size=")]
    block, longest = int(line.split("=")[1].split(":")[0]), int(line.split(" has ")[1].split()[0])
    assert longest > 65 and block == -(-(longest - 1) // 64) * 64 and "every example whole" in line, line
    assert "longer than model.block_size" not in trained.stderr
    best = str(next((tmp_path / "runs").glob("*/best.ckpt")))
    answer = run(project, "generate.py", "--checkpoint", best, "--chat", "Where?", "--max-new-tokens", "8")
    assert answer.returncode == 0 and answer.stdout.strip(), answer.stderr[-2000:]
    folder = exported_folder(project, best, "hf-lora")
    tokens = np.random.default_rng(3).integers(0, TOKENS, (2, 32)).astype(np.int32)
    ours = mindspore_logits(project, tmp_path, best, tokens)  # unmerged: W x + B A x alpha / rank
    with torch.no_grad():
        theirs = load_hf(folder)(torch.from_numpy(tokens).long()).logits.numpy()
    base = hf_folder(tmp_path / "again", "qwen2.5")  # the same random base: the fine-tune moved it
    with torch.no_grad():
        assert np.abs(base(torch.from_numpy(tokens).long()).logits.numpy() - theirs).max() > 1e-3
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(ours).max()
    # The adapters alone, as PEFT saves them, over the original Hugging Face folder
    adapters = exported_folder(project, best, "peft-lora", fmt="peft")
    with warnings.catch_warnings(record=True) as caught:  # PEFT only warns of missing or unexpected keys
        warnings.simplefilter("always")
        tuned = peft.PeftModel.from_pretrained(load_hf(tmp_path / "qwen"), str(adapters)).eval()
    assert not [w for w in caught if "adapter keys" in str(w.message)], [str(w.message) for w in caught]
    with torch.no_grad():
        theirs = tuned(torch.from_numpy(tokens).long()).logits.numpy()
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(ours).max()
    adapter_config = json.loads((adapters / "adapter_config.json").read_text())
    assert adapter_config["r"] == 4 and adapter_config["base_model_name_or_path"] == "qwen"  # no machine path
    # PEFT's one-line load finds the base by itself (0.10.1 named the .ckpt, which it cannot read), here
    # from the folder holding the model, as its name is given
    monkeypatch.chdir(tmp_path)
    with torch.no_grad():
        auto = peft.AutoPeftModelForCausalLM.from_pretrained(str(adapters), dtype=torch.float32).eval()
        theirs = auto(torch.from_numpy(tokens).long()).logits.numpy()
        assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(ours).max()
