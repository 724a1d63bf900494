/* chat.c: the built-in chat templates (the formats of the model families' own Jinja
 * templates, rendered for system, user and assistant messages) and their recognition. */
#include "chat.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

static const char *const names[CHAT_N] = {"zephyr", "llama2", "llama3", "chatml", "phi3",
                                          "gemma"};

const char *chat_template_name(ChatTemplate t)
{
    return t >= 0 && t < CHAT_N ? names[t] : "?";
}

int chat_template_parse(const char *name, ChatTemplate *out, char *err, size_t errlen)
{
    if (strcmp(name, "tinyllama") == 0) {
        *out = CHAT_ZEPHYR;
        return 0;
    }
    for (int i = 0; i < CHAT_N; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (ChatTemplate)i;
            return 0;
        }
    return util_err(err, errlen, "--chat-template: '%s' is not a built-in template (zephyr, "
                    "tinyllama, llama2, llama3, chatml, phi3, gemma)", name);
}

int chat_template_detect(const char *j, ChatTemplate *out)
{
    /* Most distinctive first: Phi-3 shares <|user|> with Zephyr but ends turns with <|end|>. */
    static const struct {
        const char *marker;
        ChatTemplate t;
    } rules[] = {{"<|start_header_id|>", CHAT_LLAMA3}, {"<|im_start|>", CHAT_CHATML},
                 {"<start_of_turn>", CHAT_GEMMA},      {"<|end|>", CHAT_PHI3},
                 {"<|assistant|>", CHAT_ZEPHYR},       {"[INST]", CHAT_LLAMA2}};
    if (!j)
        return -1;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strstr(j, rules[i].marker)) {
            *out = rules[i].t;
            return 0;
        }
    return -1;
}

const char *chat_template_stop(ChatTemplate t)
{
    static const char *const stops[CHAT_N] = {"</s>", "</s>", "<|eot_id|>", "<|im_end|>",
                                              "<|end|>", "<end_of_turn>"};
    return t >= 0 && t < CHAT_N ? stops[t] : "";
}

typedef struct {
    char *s;
    size_t len, cap;
} Buf;

static void put(Buf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

/* s without leading and trailing whitespace (Jinja's trim: Python's str.strip()). */
static void put_trimmed(Buf *b, const char *s)
{
    static const char ws[] = " \t\n\r\v\f";
    while (*s && strchr(ws, *s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && strchr(ws, s[n - 1]))
        n--;
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* Llama 2: the system prompt goes inside the first [INST] between <<SYS>> markers; every
 * exchange after the first opens with BOS again (HF's template writes bos_token + "[INST]"). */
static void format_llama2(Buf *b, const ChatMessage *m, int n)
{
    const char *sys = NULL;
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (strcmp(m[i].role, "system") == 0) {
            sys = m[i].content;
        } else if (strcmp(m[i].role, "user") == 0) {
            put(b, first ? "[INST] " : "<s>[INST] ");
            if (sys) {
                put(b, "<<SYS>>\n");
                put(b, sys);
                put(b, "\n<</SYS>>\n\n");
                sys = NULL;
            }
            put(b, m[i].content);
            put(b, " [/INST]");
            first = 0;
        } else {
            put(b, " ");
            put(b, m[i].content);
            put(b, " </s>");
        }
    }
}

char *chat_format(ChatTemplate t, const ChatMessage *m, int n, int add_generation_prompt,
                  char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (!m[i].role || !m[i].content ||
            (strcmp(m[i].role, "system") && strcmp(m[i].role, "user") &&
             strcmp(m[i].role, "assistant"))) {
            util_err(err, errlen, "chat message %d: role '%s' is not system, user or assistant",
                     i, m[i].role ? m[i].role : "(none)");
            return NULL;
        }
    Buf b = {xmalloc(256), 0, 256};
    b.s[0] = '\0';
    if (t == CHAT_LLAMA2) {
        format_llama2(&b, m, n);
        return b.s;
    }
    const char *gemma_sys = NULL;
    for (int i = 0; i < n; i++) {
        const char *role = m[i].role;
        switch (t) {
        case CHAT_ZEPHYR:
        case CHAT_PHI3:
            put(&b, "<|");
            put(&b, role);
            put(&b, "|>\n");
            put(&b, m[i].content);
            put(&b, t == CHAT_ZEPHYR ? "</s>\n" : "<|end|>\n");
            break;
        case CHAT_LLAMA3: /* bos_token first, each content | trim, as Meta's template */
            if (i == 0)
                put(&b, "<|begin_of_text|>");
            put(&b, "<|start_header_id|>");
            put(&b, role);
            put(&b, "<|end_header_id|>\n\n");
            put_trimmed(&b, m[i].content);
            put(&b, "<|eot_id|>");
            break;
        case CHAT_CHATML:
            put(&b, "<|im_start|>");
            put(&b, role);
            put(&b, "\n");
            put(&b, m[i].content);
            put(&b, "<|im_end|>\n");
            break;
        case CHAT_GEMMA: /* no system role: it opens the first user turn */
            if (strcmp(role, "system") == 0) {
                gemma_sys = m[i].content;
                break;
            }
            put(&b, "<start_of_turn>");
            put(&b, strcmp(role, "assistant") == 0 ? "model" : "user");
            put(&b, "\n");
            if (gemma_sys && strcmp(role, "user") == 0) {
                put(&b, gemma_sys);
                put(&b, "\n\n");
                gemma_sys = NULL;
            }
            put(&b, m[i].content);
            put(&b, "<end_of_turn>\n");
            break;
        default: break;
        }
    }
    if (add_generation_prompt) {
        static const char *const open[CHAT_N] = {
            "<|assistant|>\n", "", "<|start_header_id|>assistant<|end_header_id|>\n\n",
            "<|im_start|>assistant\n", "<|assistant|>\n", "<start_of_turn>model\n"};
        put(&b, open[t]);
    }
    return b.s;
}
