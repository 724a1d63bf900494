# The chat template travels with the model: headsplit-convert --format hf stores
# tokenizer_config.json's chat_template as /tokenizer's chat_template attribute, and --chat
# recognises its family without --chat-template.  (GGUF's tokenizer.chat_template takes the
# same path: writer_put_chat_template.)
. "$(dirname "$0")/common.sh"
skip_without "$SHARED/stories260K-hf/model.safetensors"
mkdir "$T/hf"
for f in "$SHARED"/stories260K-hf/*; do ln -s "$f" "$T/hf/"; done
rm "$T/hf/tokenizer_config.json"
# TinyLlama-Chat's (Zephyr) template, as its tokenizer_config.json spells it.
jq '. + {chat_template: "{% for message in messages %}{% if message[\"role\"] == \"user\" %}{{ \"<|user|>\\n\" + message[\"content\"] + eos_token }}{% elif message[\"role\"] == \"assistant\" %}{{ \"<|assistant|>\\n\" + message[\"content\"] + eos_token }}{% endif %}{% if loop.last and add_generation_prompt %}{{ \"<|assistant|>\" }}{% endif %}{% endfor %}"}' \
  "$SHARED/stories260K-hf/tokenizer_config.json" > "$T/hf/tokenizer_config.json"
"$CONVERT" --format hf --dir "$T/hf" --out "$T/m.h5" > /dev/null
h5dump -a /tokenizer/chat_template "$T/m.h5" | grep -q '<|assistant|>' \
  || fail "chat_template not stored in /tokenizer"
printf 'Once upon a time\n/exit\n' | timeout -k 5 60 "$HS" --model "$T/m.h5" --chat -n 4 \
  > "$T/out" 2>&1 || { cat "$T/out"; fail "--chat on the converted model failed"; }
grep -q "zephyr template" "$T/out" || { cat "$T/out"; fail "stored template not recognised"; }
# Without a stored template, --chat needs --chat-template: the plain conversion says so.
"$CONVERT" --format hf --dir "$SHARED/stories260K-hf" --out "$T/plain.h5" > /dev/null
! h5dump -a /tokenizer/chat_template "$T/plain.h5" > /dev/null 2>&1 \
  || fail "a template was stored where the source has none"
echo "PASS: the chat template is stored at conversion and recognised by --chat"
