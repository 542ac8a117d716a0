"""What the zoo covers and how small it builds: the task mappings, the CI
slice, tolerances, and the sizes configs are shrunk to and inputs are made
with."""


# (task label, name of the auto mapping in transformers.models.auto.modeling_auto)
TASKS = [
    ("base", "MODEL_MAPPING_NAMES"),
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("seq-cls", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("token-cls", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
    ("image-cls", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("audio-cls", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
]
LM_TASKS = {"causal-lm", "masked-lm", "seq2seq-lm"}
# Architectures per worker process (each compiles its own executables; a fresh
# process per chunk keeps memory and mappings bounded).
_CHUNK = 200

# The CI slice: the common decoder, encoder, seq2seq and vision families.
FAST_ARCHS = [
    "LlamaForCausalLM", "GPT2LMHeadModel", "MistralForCausalLM", "Qwen2ForCausalLM",
    "GPTNeoXForCausalLM", "OPTForCausalLM", "BertModel", "BertForMaskedLM",
    "DistilBertForSequenceClassification", "RobertaForTokenClassification",
    "T5ForConditionalGeneration", "BartForConditionalGeneration", "ViTForImageClassification",
    "MixtralForCausalLM",
]

RTOL_SCALE = 1e-3
SCALE_FLOOR = 1e-2

SEED = 0
BATCH, SEQ, DEC_SEQ = 2, 8, 6
HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, IMAGE = 32, 4, 2, 64, 256, 64
