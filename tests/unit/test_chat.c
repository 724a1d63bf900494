/* test_chat.c: chat templates (each family's rendering, recognition from stored Jinja
 * templates, unknown names), special-token text in prompts (tokenizer_encode_special equals
 * tokenizer_encode without it, and gives the special ids with it), the sampler's top-k,
 * min-p and repeat penalty. */
#include "test_helpers.h"

#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "sampler.h"
#include "tokenizer.h"
#include "util.h"

static const ChatMessage conv[] = {{"system", "Be brief."}, {"user", "Hi"},
                                   {"assistant", "Hello!"}, {"user", "Bye"}};

static void expect_format(ChatTemplate t, const char *want)
{
    char err[256];
    char *s = chat_format(t, conv, 4, 1, err, sizeof err);
    assert_non_null(s);
    assert_string_equal(s, want);
    free(s);
}

static void test_formats(void **state)
{
    (void)state;
    expect_format(CHAT_ZEPHYR, "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n"
                               "Hello!</s>\n<|user|>\nBye</s>\n<|assistant|>\n");
    expect_format(CHAT_CHATML, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                               "<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                               "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    expect_format(CHAT_LLAMA2, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
                               "<s>[INST] Bye [/INST]");
    expect_format(CHAT_LLAMA3,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "Be brief.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_format(CHAT_PHI3, "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n"
                             "Hello!<|end|>\n<|user|>\nBye<|end|>\n<|assistant|>\n");
    expect_format(CHAT_GEMMA, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                              "<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\n"
                              "Bye<end_of_turn>\n<start_of_turn>model\n");
    char err[256];
    ChatMessage bad = {"tool", "x"};
    assert_null(chat_format(CHAT_CHATML, &bad, 1, 1, err, sizeof err));
    assert_non_null(strstr(err, "role 'tool'"));
}

static void test_names_and_detection(void **state)
{
    (void)state;
    ChatTemplate t;
    char err[256];
    assert_int_equal(chat_template_parse("tinyllama", &t, err, sizeof err), 0);
    assert_int_equal(t, CHAT_ZEPHYR);
    for (int i = 0; i < CHAT_N; i++) {
        assert_int_equal(chat_template_parse(chat_template_name((ChatTemplate)i), &t, err,
                                             sizeof err), 0);
        assert_int_equal(t, i);
    }
    assert_int_equal(chat_template_parse("jinja", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "'jinja' is not a built-in template"));
    /* fragments of the families' real templates */
    const struct {
        const char *jinja;
        ChatTemplate t;
    } cases[] = {
        {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
         "message['content'] + eos_token }}{% elif message['role'] == 'assistant' %}{{ "
         "'<|assistant|>\\n' + message['content'] + eos_token }}{% endif %}{% endfor %}",
         CHAT_ZEPHYR},
        {"{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + "
         "' [/INST]' }}{% endfor %}", CHAT_LLAMA2},
        {"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}",
         CHAT_LLAMA3},
        {"{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'}}",
         CHAT_CHATML},
        {"{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>'}}",
         CHAT_PHI3},
        {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>' }}",
         CHAT_GEMMA}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(chat_template_detect(cases[i].jinja, &t), 0);
        assert_int_equal(t, cases[i].t);
    }
    assert_int_equal(chat_template_detect("{{ messages }}", &t), -1);
    assert_int_equal(chat_template_detect(NULL, &t), -1);
}

static void test_special_tokens(void **state)
{
    (void)state;
    TEST_NEED_SHARED("stories260K/tok512.bin");
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/stories260K/tok512.bin", test_shared_dir());
    Tokenizer *t = NULL;
    assert_int_equal(tokenizer_load_llama2c(&t, path, 512, err, sizeof err), 0);
    const char *plain[] = {"", "Once upon a time", "a < b > c", "<s", "x</"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        int *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        assert_int_equal(tokenizer_encode(t, plain[i], strlen(plain[i]), &a, &na, err,
                                          sizeof err), 0);
        assert_int_equal(tokenizer_encode_special(t, plain[i], strlen(plain[i]), &b, &nb, err,
                                                  sizeof err), 0);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na * sizeof(int));
        free(a);
        free(b);
    }
    /* "Hi</s>Yo": BOS, "Hi" (as encoded alone, without its BOS), EOS, " Yo" likewise */
    int *ids = NULL, *hi = NULL, *yo = NULL;
    size_t n = 0, nhi = 0, nyo = 0;
    assert_int_equal(tokenizer_encode_special(t, "Hi</s>Yo", 8, &ids, &n, err, sizeof err), 0);
    assert_int_equal(tokenizer_encode(t, "Hi", 2, &hi, &nhi, err, sizeof err), 0);
    assert_int_equal(tokenizer_encode(t, "Yo", 2, &yo, &nyo, err, sizeof err), 0);
    assert_int_equal(n, 1 + (nhi - 1) + 1 + (nyo - 1));
    assert_int_equal(ids[0], tokenizer_bos(t));
    assert_memory_equal(ids + 1, hi + 1, (nhi - 1) * sizeof(int));
    assert_int_equal(ids[nhi], tokenizer_eos(t));
    assert_memory_equal(ids + nhi + 1, yo + 1, (nyo - 1) * sizeof(int));
    free(ids);
    free(hi);
    free(yo);
    /* a prompt that opens with a special token: one BOS */
    assert_int_equal(tokenizer_encode_special(t, "<s>Hi", 5, &ids, &n, err, sizeof err), 0);
    assert_int_equal(ids[0], tokenizer_bos(t));
    assert_int_not_equal(ids[1], tokenizer_bos(t));
    free(ids);
    assert_true(tokenizer_is_special(t, tokenizer_eos(t)));
    tokenizer_free(t);
}

static void test_sampler_filters(void **state)
{
    (void)state;
    enum { V = 6 };
    const float base[V] = {1.0f, 3.0f, 2.9f, -1.0f, 2.0f, 0.5f};
    float l[V];
    /* top-k 1 at any temperature is greedy */
    Sampler s;
    sampler_init(&s, V, 1.0f, 1.0f, 5);
    sampler_set_filters(&s, 1, 0);
    for (int r = 0; r < 50; r++) {
        memcpy(l, base, sizeof l);
        assert_int_equal(sampler_sample(&s, l), 1);
    }
    /* top-k 2: only ids 1 and 2 */
    sampler_set_filters(&s, 2, 0);
    for (int r = 0; r < 200; r++) {
        memcpy(l, base, sizeof l);
        int id = sampler_sample(&s, l);
        assert_true(id == 1 || id == 2);
    }
    /* min-p 0.5: p >= half the best's: ids 1, 2 (e^-0.1), not 4 (e^-1) */
    sampler_set_filters(&s, 0, 0.5f);
    for (int r = 0; r < 200; r++) {
        memcpy(l, base, sizeof l);
        int id = sampler_sample(&s, l);
        assert_true(id == 1 || id == 2);
    }
    sampler_free(&s);
    /* repeat penalty: positive logits divided, negative multiplied, each id once */
    memcpy(l, base, sizeof l);
    const int recent[] = {1, 3, 1};
    sampler_penalize(l, V, recent, 3, 2.0f);
    assert_true(l[1] == 1.5f && l[3] == -2.0f && l[0] == 1.0f);
    /* greedy after the penalty picks id 2 */
    sampler_init(&s, V, 0.0f, 1.0f, 5);
    assert_int_equal(sampler_sample(&s, l), 2);
    sampler_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_names_and_detection),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_sampler_filters),
    };
    return cmocka_run_group_tests_name("chat", tests, NULL, NULL);
}
