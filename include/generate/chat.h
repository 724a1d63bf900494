/* chat.h: chat templates, built in by name (no Jinja engine): a conversation rendered as the
 * text a chat model was trained on, recognised from the template stored with the model. */
#ifndef HEADSPLIT_CHAT_H
#define HEADSPLIT_CHAT_H

#include <stddef.h>

typedef enum {
    CHAT_ZEPHYR = 0, /* <|user|>\n...</s>\n  (Zephyr, TinyLlama-Chat) */
    CHAT_LLAMA2,     /* [INST] ... [/INST] ... </s><s> */
    CHAT_LLAMA3,     /* <|start_header_id|>user<|end_header_id|>\n\n...<|eot_id|> */
    CHAT_CHATML,     /* <|im_start|>user\n...<|im_end|>\n */
    CHAT_PHI3,       /* <|user|>\n...<|end|>\n */
    CHAT_GEMMA,      /* <start_of_turn>user\n...<end_of_turn>\n */
    CHAT_N
} ChatTemplate;

typedef struct {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} ChatMessage;

/* By name ("zephyr", "tinyllama", "llama2", "llama3", "chatml", "phi3", "gemma"): 0, or -1
 * with err listing the names. */
int chat_template_parse(const char *name, ChatTemplate *out, char *err, size_t errlen);
const char *chat_template_name(ChatTemplate t);
/* The family of a stored Jinja template (HF tokenizer_config.json chat_template, GGUF
 * tokenizer.chat_template) by its distinctive markers: 0, or -1 when none is recognised. */
int chat_template_detect(const char *jinja, ChatTemplate *out);
/* The conversation as text (malloc'ed), ending with the assistant's opening when
 * add_generation_prompt.  BOS is left to the tokenizer, except in Llama 3's, which opens with
 * "<|begin_of_text|>" as Meta's template does (tokenizer_encode_special then adds no second
 * BOS).  NULL with err for a role the template has no place for. */
char *chat_format(ChatTemplate t, const ChatMessage *msgs, int n, int add_generation_prompt,
                  char *err, size_t errlen);
/* The text that ends an assistant's turn (a stop string for generation). */
const char *chat_template_stop(ChatTemplate t);

#endif
