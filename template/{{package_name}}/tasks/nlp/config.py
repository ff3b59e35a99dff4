"""Config sections of the nlp task (``data:`` and ``model:`` in config.yaml)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...engine.errors import ConfigError
from ...engine.schema import Config, DataSection, Section

MIN_BPE_VOCAB = 256 + 1  # a byte-level BPE has a symbol for each of the 256 bytes, plus <|endoftext|>


class DataConfig(DataSection):
    path: str | None = None  # null: Python's bundled pydoc text; else a UTF-8 file or a folder of .txt files
    # char: vocabulary = characters of the text; byte: 256 UTF-8 bytes; bpe: byte-level BPE
    tokenizer: Literal["char", "byte", "bpe"] = "char"
    vocab_size: int = Field(2048, gt=0)  # bpe: tokens of the BPE trained on the corpus
    tokenizer_file: str | None = None  # bpe: a Hugging Face tokenizer.json to use instead of training one
    eval_fraction: float = Field(0.1, gt=0, lt=1)  # the last tokens, held out for evaluation
    cache_dir: str | None = None  # token files and fitted tokenizers; null: <output.dir>/.cache
    # text; chat (a JSONL of OpenAI messages or ShareGPT conversations); instruct (Alpaca);
    # auto: chat or instruct for a .jsonl file (by its first example), else text
    format: Literal["auto", "text", "chat", "instruct"] = "auto"
    train_on_prompt: bool = False  # chat/instruct: the loss on every token, not only the assistant's
    packing: bool = False  # chat/instruct: examples back to back in windows, not one example per row
    overlong: Literal["cut", "refuse"] = "cut"  # an example longer than the context: its first tokens, or an error
    chat_template: str = "default"  # which of a checkpoint's named chat templates (a list of {name, template})
    template_kwargs: dict[str, Any] = Field(default_factory=dict)  # extra chat-template variables (enable_thinking...)
    # a model.pretrained with no chat template: ChatML's <|im_start|> and <|im_end|> become single new
    # tokens (rows added to the embedding and head, as TRL's setup_chat_format), <|im_end|> its end of text
    add_special_tokens: bool = False
    eval_path: str | None = None  # chat/instruct: a JSONL to evaluate on; null: the last eval_fraction of examples

    @model_validator(mode="after")
    def _bpe_settings(self):
        if self.tokenizer_file and self.tokenizer != "bpe":
            raise ValueError(f"data.tokenizer_file is set but data.tokenizer={self.tokenizer!r}: "
                             "set data.tokenizer=bpe (or data.tokenizer_file=null)")
        if self.tokenizer == "bpe" and not self.tokenizer_file and self.vocab_size < MIN_BPE_VOCAB:
            raise ValueError(f"data.vocab_size={self.vocab_size} is too small for a byte-level BPE: it needs "
                             f">= {MIN_BPE_VOCAB} (256 byte symbols + <|endoftext|>)")
        return self


LORA_LAYERS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


class LoraConfig(Section):
    rank: int = Field(0, ge=0)  # 0: no LoRA (every weight trains)
    alpha: float = Field(16.0, gt=0)  # the adapters' update is scaled by alpha / rank
    dropout: float = Field(0.0, ge=0, lt=1)  # on the adapters' input only
    targets: list[str] = ["q_proj", "v_proj"]  # llama projections that get adapters (Hugging Face names)

    @model_validator(mode="after")
    def _known_targets(self):
        if self.rank and not self.targets:
            raise ValueError("model.lora.targets is empty: name the projections to adapt, e.g. [q_proj, v_proj]")
        unknown = next((t for t in self.targets if t not in LORA_LAYERS), None)
        if self.rank and unknown is not None:
            raise ValueError(f"model.lora.targets: {unknown!r} matches no layer of arch llama "
                             f"(its projections: {', '.join(LORA_LAYERS)})")
        return self


class RopeScaling(Section):
    """llama: RoPE frequencies for a context past the pre-training one, as transformers' rope_parameters."""

    # linear: positions / factor; llama3: Llama-3.1/3.2's bands; yarn (Qwen, DeepSeek); dynamic:
    # NTK-aware, plain RoPE within max_position_embeddings (the only context trained here);
    # longrope (Phi-3/4): per-frequency factors, short_factor up to the original context
    type: Literal["llama3", "linear", "yarn", "dynamic", "longrope"]
    factor: float = Field(gt=0)  # yarn/longrope: the model's context / original_max_position_embeddings
    low_freq_factor: float = Field(1.0, gt=0)  # llama3 only, as is high_freq_factor
    high_freq_factor: float = Field(4.0, gt=0)
    original_max_position_embeddings: int = Field(8192, gt=0)
    attention_factor: float | None = None  # yarn/longrope: cos and sin times this; null: from factor
    beta_fast: float = 32.0  # yarn, as are the three below
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    short_factor: list[float] | None = None  # longrope, one per rotated pair, as is long_factor
    long_factor: list[float] | None = None

    KEYS: ClassVar[dict[str, tuple[str, ...]]] = {  # what config.json carries for each type
        "linear": ("factor",), "dynamic": ("factor",),
        "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
        "yarn": ("factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
                 "mscale", "mscale_all_dim", "truncate"),
        "longrope": ("factor", "original_max_position_embeddings", "attention_factor", "short_factor",
                     "long_factor")}

    @model_validator(mode="after")
    def _complete(self):
        if self.type == "llama3" and self.high_freq_factor <= self.low_freq_factor:
            raise ValueError("model.rope_scaling: high_freq_factor must exceed low_freq_factor")
        if self.type == "longrope" and not (self.short_factor and self.long_factor):
            raise ValueError("model.rope_scaling: type longrope needs short_factor and long_factor")
        return self

    def hf(self) -> dict[str, Any]:
        """As config.json's rope_parameters (without rope_theta)."""
        return {"rope_type": self.type, **{key: getattr(self, key) for key in self.KEYS[self.type]
                                           if getattr(self, key) is not None}}


class ModelConfig(Section):
    # gpt: the layers below as configured; gpt2: GPT-2's own (biases, tied head), so Hugging Face
    # GPT-2 weights import with convert_weights.py; llama: Llama/Qwen2's layout (RoPE, RMSNorm,
    # SwiGLU, grouped-query attention), so their Hugging Face weights import
    arch: Literal["gpt", "gpt2", "llama"] = "gpt"
    # Context length in tokens (training blocks, generation window); null: DEFAULT_BLOCK for a model
    # trained here, and with model.pretrained (llama) the data's longest example, at most the
    # checkpoint's context (data.py: context_length).
    block_size: int | None = Field(None, gt=0)
    n_layer: int = Field(2, gt=0)
    n_head: int = Field(4, gt=0)
    d_model: int = Field(128, gt=0)  # must be divisible by n_head
    mlp_ratio: int = Field(4, gt=0)  # hidden width of the feed-forward block = mlp_ratio * d_model
    dropout: float = Field(0.0, ge=0, lt=1)
    tie_embeddings: bool = True  # the output layer reuses the token embedding matrix
    bias: bool = False  # bias vectors in the linear layers (false: a little faster, as good); llama: q/k/v only
    d_ff: int | None = Field(None, gt=0)  # llama: MLP width (intermediate_size); null: mlp_ratio * d_model
    n_kv_head: int | None = Field(None, gt=0)  # llama: key/value heads (grouped-query attention); null: n_head
    rope_theta: float = Field(10000.0, gt=0)  # llama: RoPE base
    norm_eps: float = Field(1e-6, gt=0)  # llama: RMSNorm epsilon
    rope_scaling: RopeScaling | None = None  # llama: null = plain RoPE
    head_dim: int | None = Field(None, gt=0)  # llama: width of one head; null: d_model / n_head (Qwen3: set)
    # llama: RMSNorm on the queries and keys before RoPE: on each head (Qwen3, Gemma-3) or across
    # all heads (OLMo-2); true reads as head
    qk_norm: Literal["none", "head", "all"] = "none"
    # llama: the decoder's family traits, which convert_weights.py reads off config.json
    # (layouts/); each default is Llama's
    # RMSNorm before each block (Llama), after it (OLMo-2), or both (Gemma, GLM-4)
    norm_layout: Literal["pre", "post", "sandwich"] = "pre"
    norm_offset: bool = False  # RMSNorm scales by 1 + weight (Gemma)
    activation: Literal["silu", "gelu_tanh"] = "silu"  # of the gated MLP (Gemma: gelu_tanh)
    o_bias: bool = False  # a bias on o_proj too (Llama's attention_bias; model.bias: q/k/v)
    mlp_bias: bool = False  # biases on the MLP's projections
    embedding_scale: float = 1.0  # token embeddings times this (Gemma: sqrt(d_model); Granite)
    residual_scale: float = 1.0  # each block's output times this before it is added (Granite)
    attention_scale: float | None = None  # the scores' scale; null: 1 / sqrt(head width)
    logits_scaling: float = Field(1.0, gt=0)  # logits divided by this (Granite)
    attn_softcap: float | None = Field(None, gt=0)  # scores -> cap * tanh(scores / cap) (Gemma-2)
    final_softcap: float | None = Field(None, gt=0)  # logits likewise
    rotary_fraction: float = Field(1.0, gt=0, le=1)  # the share of each head RoPE turns (Phi-4-mini, GLM-4)
    sliding_window: int | None = Field(None, gt=0)  # a query sees its last sliding_window positions...
    # ...in these layers (null: every layer when sliding_window is set)
    layer_types: list[Literal["full_attention", "sliding_attention"]] | None = None
    local_rope_theta: float | None = Field(None, gt=0)  # sliding layers' RoPE base, unscaled (Gemma-3)
    nope_layers: list[int] = []  # layers without RoPE (SmolLM3)
    # Rows of the token embedding and head; null: the tokenizer's vocabulary. More is padding
    # (Qwen2.5: 151,936 rows for 151,665 tokens): trained like any row, never sampled.
    embedding_rows: int | None = Field(None, gt=0)
    lora: LoraConfig = LoraConfig()  # llama: low-rank adapters; rank 0 = off
    # A checkpoint of this project (trained here, or made by convert_weights.py) to start from:
    # all its weights and its tokenizer. It defines the model: every key above but dropout (and
    # block_size for llama) is taken from it; lora too when it holds adapters. So
    # `--set model.pretrained=weights/x.ckpt --set model.lora.rank=8` is a whole fine-tuning setup.
    pretrained: str | None = None

    @field_validator("qk_norm", mode="before")
    @classmethod
    def _qk_norm_bool(cls, value):  # 0.12.0 checkpoints: a bool (true: per head)
        return {True: "head", False: "none"}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _heads_divide_width(self):
        if self.block_size is None and not self.pretrained:
            self.block_size = DEFAULT_BLOCK
        if self.d_model % self.n_head and not (self.arch == "llama" and self.head_dim):
            raise ValueError(f"model.d_model={self.d_model} must be divisible by model.n_head={self.n_head}")
        if self.arch == "gpt2" and not (self.bias and self.tie_embeddings):
            raise ValueError("model.arch=gpt2 has biases and a tied head: set model.bias=true and "
                             "model.tie_embeddings=true (or model.arch=gpt)")
        if self.n_kv_head and self.n_head % self.n_kv_head:
            raise ValueError(f"model.n_head={self.n_head} must be divisible by model.n_kv_head={self.n_kv_head}")
        if self.arch == "llama" and self.dropout:
            raise ValueError(f"model.dropout={self.dropout}: model.arch=llama has no dropout layers (as Llama, Qwen "
                             "and Mistral); set model.dropout=0 (LoRA's own: model.lora.dropout)")
        llama_only = {"lora.rank": self.lora.rank, "n_kv_head": self.n_kv_head, "d_ff": self.d_ff,
                      "head_dim": self.head_dim, "rope_scaling": self.rope_scaling,
                      "sliding_window": self.sliding_window,
                      **{key: getattr(self, key) != field.default for key, field in type(self).model_fields.items()
                         if key in DECODER_TRAITS}}
        key = next((key for key, value in llama_only.items() if value), None)
        if self.arch != "llama" and key:
            raise ValueError(f"model.{key} is for model.arch=llama (this is {self.arch!r})")
        head = self.head_dim or self.d_model // self.n_head
        if self.arch == "llama" and head % 2:
            raise ValueError(f"model.arch=llama: the head width {head} (model.head_dim, or d_model / n_head) "
                             "must be even (RoPE rotates pairs)")
        if self.layer_types is not None and len(self.layer_types) != self.n_layer:
            raise ValueError(f"model.layer_types has {len(self.layer_types)} entries for {self.n_layer} layers")
        if any(not 0 <= layer < self.n_layer for layer in self.nope_layers):
            raise ValueError(f"model.nope_layers {self.nope_layers}: layers are 0..{self.n_layer - 1}")
        if self.lora.rank and self.tie_embeddings and "lm_head" in self.lora.targets:
            raise ValueError("model.lora.targets: 'lm_head' matches no layer: the head is tied to the embedding "
                             "(model.tie_embeddings=true)")
        return self


DECODER_TRAITS = ("qk_norm", "norm_layout", "norm_offset", "activation", "o_bias", "mlp_bias", "embedding_scale",
                  "residual_scale", "attention_scale", "logits_scaling", "attn_softcap", "final_softcap",
                  "rotary_fraction", "layer_types", "local_rope_theta", "nope_layers")  # model.arch=llama only
DEFAULT_BLOCK = 64  # model.block_size of a model trained here, when the config leaves it null

# What fine-tuning chooses; every other model key is the model.pretrained checkpoint's (and its
# LoRA adapters' rank, alpha and targets when it has some).
TRAINING_KEYS = ("pretrained", "dropout", "lora")


def defined_by(saved: dict[str, Any]) -> dict[str, Any]:
    """The model keys a checkpoint's saved ``model`` section fixes: ``lora.*`` dotted (its adapters')."""
    free = {*TRAINING_KEYS, *(("block_size",) if saved.get("arch") == "llama" else ())}  # RoPE: any context
    keys = {key: value for key, value in saved.items() if key not in free and key in ModelConfig.model_fields}
    lora = saved.get("lora") or {}
    if lora.get("rank"):
        keys.update({f"lora.{key}": lora[key] for key in ("rank", "alpha", "targets")})
    return keys


class LossConfig(Section):
    # With a target mask (chat/instruct data): token = the mean over every target token of the
    # optimizer step (all micro-batches and ranks), as transformers' Trainer and TRL's SFTTrainer
    # average, so a fine-tune here weighs tokens as one there does and packed windows do not
    # matter; row = each row's mean over its own targets, then the mean of rows (a short answer's
    # tokens weigh more). Text data: every position is a target, the two are the same.
    normalize: Literal["token", "row"] = "token"


class TaskConfig(Config):
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    loss: LossConfig = LossConfig()

    @model_validator(mode="after")
    def _new_tokens_train(self):
        if self.data.add_special_tokens and self.model.lora.rank:
            raise ValueError("data.add_special_tokens with model.lora: the new tokens' rows would stay frozen at "
                             "their first value; fine-tune every weight (model.lora.rank=0)")
        return self

    @classmethod
    def complete(cls, raw: dict[str, Any], command_line: dict[str, Any]) -> dict[str, Any]:
        """``model.pretrained``: the checkpoint defines the model. Its arch, sizes, RoPE and norm
        settings (and its adapters' LoRA settings) replace the YAML files'; a ``--set`` that
        contradicts one is an error naming both values."""
        model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
        if not isinstance(model.get("pretrained"), str):
            return raw
        from ...engine.checkpoint import read_meta  # imports MindSpore: only with a checkpoint to read

        path = model["pretrained"]
        saved_config = read_meta(path, tasks=("nlp",))["config"]
        saved = saved_config["model"]
        given = command_line.get("model") if isinstance(command_line.get("model"), dict) else {}
        model = {**model, "lora": dict(model.get("lora") or {})}
        for key, value in defined_by(saved).items():
            section, leaf = (model["lora"], key[5:]) if key.startswith("lora.") else (model, key)
            asked = (given.get("lora") or {}) if key.startswith("lora.") else given
            if leaf in asked and asked[leaf] != value:
                raise ConfigError(f"--set model.{key}={asked[leaf]!r}: model.pretrained={path} was trained with "
                                  f"model.{key}={value!r} (drop the --set: the checkpoint defines the model)")
            section[leaf] = value
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        if "tokenizer" not in (command_line.get("data") or {}):  # its tokenizer's kind too (a --set is checked later)
            data = {**data, "tokenizer": saved_config["data"]["tokenizer"]}
        return {**raw, "model": model, "data": data}
