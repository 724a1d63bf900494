# shellcheck shell=bash
# Bad inputs: hostile or broken model files, checkpoints, safetensors directories, tokenizers,
# transcripts and command lines fed to headsplit, headsplit-convert and headsplit-tokenize.
# Every case must end with a non-zero exit status (no signal, no timeout), exactly one line on
# stderr (a usage text may follow it) that names the file, option or field at fault, and no
# sanitizer report.  Prints a table of case -> exit status -> error line, then
# "N passed, 0 failed".
#   bash bad_inputs.sh BUILD_DIR SOURCE_DIR SHARED_DIR
# Broken HDF5 files are made from a good synthetic model with a small C helper (h5edit, below)
# compiled here against libhdf5; everything else is written with printf/head/dd.
. "$(dirname "$0")/common.sh"
export LC_ALL=C
TOKENIZE="$BUILD/headsplit-tokenize"
JOBS=${BAD_INPUTS_JOBS:-4}
# headsplit runs here without mpirun, as an MPI singleton: no helper daemon is needed.
export OMPI_MCA_ess_singleton_isolated=1
# Under ASan, headsplit runs without leak detection: an MPI singleton's own leaks sit in
# unloaded Open MPI plugins whose frames tests/lsan.supp cannot match.  Memory errors are still
# detected; headsplit-convert and headsplit-tokenize (no MPI) keep leak detection.
HS_ASAN="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
t_start=$(date +%s)

# ---- helpers ----------------------------------------------------------------------------------

# bin32 V... / bin64 V...: writes each V as a little-endian integer (two's complement), with
# printf -v only (forks are slow on a busy machine).
bin32() {
  local v s='' i
  for v; do
    v=$(( v & 0xffffffff ))
    for i in 0 8 16 24; do printf -v s '%s\\x%02x' "$s" $(( (v >> i) & 255 )); done
  done
  printf '%b' "$s"
}
bin64() {
  local v s='' i
  for v; do
    for i in 0 8 16 24 32 40 48 56; do printf -v s '%s\\x%02x' "$s" $(( (v >> i) & 255 )); done
  done
  printf '%b' "$s"
}

# llama2c_ckpt OUT DIM HIDDEN LAYERS HEADS KV VOCAB SEQ [EXTRA_FLOATS]: a legacy checkpoint of
# zeros whose size matches its header (plus EXTRA_FLOATS, which may be negative).
llama2c_ckpt() {
  local out=$1 dim=$2 hid=$3 L=$4 nh=$5 nkv=$6 vocab=$7 seq=$8 extra=${9:-0}
  local v=${vocab#-} hs=$(( dim / nh ))
  local kv=$(( hs * nkv ))
  local floats=$(( v * dim + L * dim + L * dim * dim + 2 * L * kv * dim + L * dim * dim + L * dim +
                   3 * L * hid * dim + dim + seq * hs ))
  [ "$vocab" -lt 0 ] && floats=$(( floats + v * dim ))
  floats=$(( floats + extra ))
  bin32 "$dim" "$hid" "$L" "$nh" "$nkv" "$vocab" "$seq" > "$out"
  head -c $(( floats * 4 )) /dev/zero >> "$out"
}

# llama2c_tok OUT N [MAX_LEN] [BAD_LEN_AT]: a tokenizer.bin of N pieces (<unk> <s> </s> p3 ...);
# piece BAD_LEN_AT gets length -5.
llama2c_tok() {
  local out=$1 n=$2 max=${3:-8} bad=${4:--1} i p
  { bin32 "$max"
    for (( i = 0; i < n; i++ )); do
      case $i in 0) p='<unk>';; 1) p='<s>';; 2) p='</s>';; *) p="p$i";; esac
      if [ "$i" -eq "$bad" ]; then bin32 0 -5; continue; fi
      bin32 0 ${#p}   # score 0.0, length
      printf '%s' "$p"
    done; } > "$out"
}

# st_file OUT HEADER DATA_BYTES [DECLARED_LEN]: a safetensors file with that JSON header.
st_file() {
  local len=${4:-${#2}}
  bin64 "$len" > "$1"
  printf '%s' "$2" >> "$1"
  head -c "$3" /dev/zero >> "$1"
}

# hf_dir DIR: a tiny LlamaForCausalLM config.json (dim 8, 1 layer, 2 heads, vocab 16).
hf_dir() {
  mkdir -p "$1"
  cat > "$1/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
 "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
 "vocab_size": 16, "max_position_embeddings": 32, "rms_norm_eps": 1e-5,
 "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2}
JSON
}

# h5edit: edits one thing in an HDF5 file (attributes of /config, datasets, tokenizer arrays).
cat > "$T/h5edit.c" <<'C'
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void del_attr(hid_t o, const char *n) { if (H5Aexists(o, n) > 0) H5Adelete(o, n); }
static void put_attr(hid_t o, const char *n, hid_t ft, hid_t mt, const void *v)
{
    del_attr(o, n);
    hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(o, n, ft, s, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, mt, v) < 0) exit(3);
    H5Aclose(a); H5Sclose(s);
}
int main(int argc, char **argv)
{
    if (argc < 4) return 2;
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return 3;
    const char *op = argv[2], *path = argv[3];
    if (!strcmp(op, "del")) {                       /* del PATH */
        if (H5Ldelete(f, path, H5P_DEFAULT) < 0) return 3;
    } else if (!strncmp(op, "attr-", 5)) {           /* attr-int|double|str|del OBJ NAME [V] */
        hid_t o = H5Oopen(f, path, H5P_DEFAULT);
        if (o < 0 || argc < 5) return 3;
        if (!strcmp(op, "attr-int")) {
            long long v = strtoll(argv[5], NULL, 0);
            put_attr(o, argv[4], H5T_STD_I64LE, H5T_NATIVE_LLONG, &v);
        } else if (!strcmp(op, "attr-double")) {
            double v = strtod(argv[5], NULL);
            put_attr(o, argv[4], H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
        } else if (!strcmp(op, "attr-str")) {
            hid_t t = H5Tcopy(H5T_C_S1);
            H5Tset_size(t, strlen(argv[5]) + 1);
            put_attr(o, argv[4], t, t, argv[5]);
            H5Tclose(t);
        } else {
            del_attr(o, argv[4]);
        }
        H5Oclose(o);
    } else if (!strcmp(op, "f32") || !strcmp(op, "i32")) { /* f32|i32 PATH DIMS...: replace */
        hsize_t d[8], n = 1;
        int r = argc - 4;
        for (int i = 0; i < r; i++) { d[i] = strtoull(argv[4 + i], NULL, 0); n *= d[i]; }
        if (H5Lexists(f, path, H5P_DEFAULT) > 0) H5Ldelete(f, path, H5P_DEFAULT);
        hid_t s = H5Screate_simple(r, d, NULL);
        hid_t ds = H5Dcreate2(f, path, op[0] == 'f' ? H5T_IEEE_F32LE : H5T_STD_I32LE, s,
                              H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        void *z = calloc(n ? n : 1, 4);
        if (ds < 0 || H5Dwrite(ds, op[0] == 'f' ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32, H5S_ALL,
                               H5S_ALL, H5P_DEFAULT, z) < 0) return 3;
        free(z); H5Dclose(ds); H5Sclose(s);
    } else if (!strcmp(op, "poke")) {                /* poke PATH INDEX VALUE: one element */
        hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
        if (ds < 0 || argc < 6) return 3;
        hid_t fs = H5Dget_space(ds);
        hsize_t dims[8], idx[8], one = 1, flat = strtoull(argv[4], NULL, 0);
        int r = H5Sget_simple_extent_dims(fs, dims, NULL);
        for (int i = r - 1; i >= 0; i--) { idx[i] = flat % dims[i]; flat /= dims[i]; }
        long long v = strtoll(argv[5], NULL, 0);
        hid_t ms = H5Screate_simple(1, &one, NULL);
        if (H5Sselect_elements(fs, H5S_SELECT_SET, 1, idx) < 0 ||
            H5Dwrite(ds, H5T_NATIVE_LLONG, ms, fs, H5P_DEFAULT, &v) < 0) return 3;
        H5Sclose(ms); H5Sclose(fs); H5Dclose(ds);
    } else {
        return 2;
    }
    return H5Fclose(f) < 0 ? 3 : 0;
}
C
CC_BIN=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
H5EDIT="$T/h5edit"
# shellcheck disable=SC2046
if ! "${CC_BIN:-cc}" -O0 -w -o "$H5EDIT" "$T/h5edit.c" $(pkg-config --cflags --libs hdf5) \
     > "$T/h5edit.log" 2>&1; then
  cat "$T/h5edit.log"
  fail "cannot compile the HDF5 editing helper (C compiler and pkg-config hdf5 needed)"
fi

# ---- inputs -------------------------------------------------------------------------------------

"$CONVERT" --synthetic stories260k --seed 3 --quiet --out "$T/good.h5"
"$CONVERT" --synthetic "llama:vocab=600" --quiet --out "$T/v600.h5"
# mk NAME EDIT...: a copy of the good model with one h5edit applied.
mk() {
  local name=$1
  shift
  cp "$T/good.h5" "$T/$name.h5"
  "$H5EDIT" "$T/$name.h5" "$@" || fail "h5edit $name: $*"
}
mk fv3 attr-int /config format_version 3
mk fv2 attr-int /config format_version 2   # version 2 (quantized) without its quantization
mk fvnone attr-del /config format_version
mk kv3 attr-int /config n_kv_heads 3
mk negdim attr-int /config dim -64
mk hugedim attr-int /config dim 4294967360
mk bigvocab attr-int /config vocab_size 16777217
mk vocab0 attr-int /config vocab_size 0
mk negctx attr-int /config context_length -1
mk eps attr-double /config norm_eps 5
mk theta attr-double /config rope_theta nan
mk arch attr-str /config architecture bert
mk rope attr-str /config rope_style spiral
mk bos attr-int /config bos_id 99999
mk dimstr attr-str /config dim sixty-four
mk dimbig attr-int /config dim 1048576
mk embshape f32 /embed 10 64
mk wqrank f32 /layers/0/wq 64 64
mk wkshape f32 /layers/2/wk 4 8 63
mk nofinal del /final_norm
mk finalint i32 /final_norm 64
mk notok del /tokenizer
mk tokkind attr-str /tokenizer kind wordpiece
mk tokmerge i32 /tokenizer/merges 4 2
"$H5EDIT" "$T/tokmerge.h5" poke /tokenizer/merges 1 70000
mk tokoffs poke /tokenizer/piece_offsets 100 3
mk tokend poke /tokenizer/piece_offsets 512 99999999
mk tokbos attr-int /tokenizer bos_id 512
mk tokscores f32 /tokenizer/scores 511
cp "$T/good.h5" "$T/tokvocab.h5"
"$H5EDIT" "$T/tokvocab.h5" del /tokenizer
h5copy -i "$T/v600.h5" -o "$T/tokvocab.h5" -s /tokenizer -d /tokenizer
: > "$T/empty.h5"
echo "this is not a model" > "$T/text.h5"
sz=$(stat -c %s "$T/good.h5")
head -c 3000 "$T/good.h5" > "$T/trunc_meta.h5"
head -c $(( sz * 9 / 10 )) "$T/good.h5" > "$T/trunc_data.h5"
cp "$T/good.h5" "$T/badsig.h5"
printf 'XXXXXXXX' | dd of="$T/badsig.h5" bs=1 seek=0 conv=notrunc status=none
long_prompt=$(printf 'once upon a time %.0s' $(seq 1 200))
printf 'hello\n' > "$T/notrans.txt"
printf 'headsplit-transcript 1\nmodel x\np 1\nt 99999\nt 5\n' > "$T/badid.txt"
printf 'headsplit-transcript 1\nmodel x\nt 5\n' > "$T/noprompt.txt"

# llama2.c checkpoints (dim 8, hidden 16, 1 layer, 2 heads) and tokenizers
llama2c_ckpt "$T/ok.bin" 8 16 1 2 2 32 8
llama2c_tok "$T/tok32.bin" 32
llama2c_tok "$T/tok31.bin" 31
llama2c_tok "$T/tokneg.bin" 32 8 7
head -c 300 "$T/tok32.bin" > "$T/toktrunc.bin"
llama2c_tok "$T/tokmax.bin" 32 0
head -c 2000 "$T/ok.bin" > "$T/trunc.bin"
llama2c_ckpt "$T/negvocab.bin" 8 16 1 2 2 -32 8 -256   # separate classifier missing
llama2c_ckpt "$T/kvdiv.bin" 8 16 1 2 3 32 8
llama2c_ckpt "$T/dimdiv.bin" 9 16 1 2 1 32 8
llama2c_ckpt "$T/zero.bin" 8 0 1 2 2 32 8
bin32 2147483647 16 1 1 1 32 8 > "$T/huge.bin"
head -c 10 "$T/ok.bin" > "$T/short.bin"
bin32 0x616b3432 2 8 16 1 2 2 > "$T/magic.bin"
head -c 4096 /dev/zero >> "$T/magic.bin"

# Hugging Face directories with broken safetensors, config.json or tokenizer.json
E='"dtype":"F32","shape":[16,8],"data_offsets":[0,512]'
hf_dir "$T/hf_hlen";    st_file "$T/hf_hlen/model.safetensors" "{\"model.embed_tokens.weight\":{$E}}" 512 100000
hf_dir "$T/hf_offs";    st_file "$T/hf_offs/model.safetensors" "{\"model.embed_tokens.weight\":{$E}}" 100
hf_dir "$T/hf_overlap"; st_file "$T/hf_overlap/model.safetensors" \
  '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}' 16
hf_dir "$T/hf_dtype";   st_file "$T/hf_dtype/model.safetensors" \
  '{"model.norm.weight":{"dtype":"I64","shape":[8],"data_offsets":[0,64]}}' 64
hf_dir "$T/hf_json";    st_file "$T/hf_json/model.safetensors" 'this is not json at all' 8
hf_dir "$T/hf_span";    st_file "$T/hf_span/model.safetensors" \
  '{"model.norm.weight":{"dtype":"F32","shape":[8],"data_offsets":[0,16]}}' 16
hf_dir "$T/hf_shape";   st_file "$T/hf_shape/model.safetensors" \
  '{"model.layers.0.input_layernorm.weight":{"dtype":"F32","shape":[9],"data_offsets":[0,36]}}' 36
hf_dir "$T/hf_shard"
printf '{"weight_map": {"model.norm.weight": "../../etc/passwd"}}' > "$T/hf_shard/model.safetensors.index.json"
hf_dir "$T/hf_none"
hf_dir "$T/hf_keys"; printf '{"architectures": ["LlamaForCausalLM"], "hidden_size": 8}' > "$T/hf_keys/config.json"
hf_dir "$T/hf_cfgjson"; printf '{"architectures": ["LlamaForCausalLM"], "hidden_size": 8,,}' > "$T/hf_cfgjson/config.json"
mkdir -p "$T/tokjson"; printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}' > "$T/tokjson/tokenizer.json"
mkdir -p "$T/tokjson2"; printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 5}, "merges": ["a b"]}}' > "$T/tokjson2/tokenizer.json"

# Controls: each crafted input differs from a working one only in its defect.
"$CONVERT" --quiet --format llama2c --checkpoint "$T/ok.bin" --tokenizer "$T/tok32.bin" \
  --out "$T/ok.h5" || fail "control: the crafted llama2.c checkpoint does not convert"
"$TOKENIZE" --model "$T/good.h5" hello > /dev/null || fail "control: headsplit-tokenize"
ASAN_OPTIONS=$HS_ASAN timeout -k 5 60 "$HS" --model "$T/good.h5" --steps 4 --quiet --prompt hi \
  > /dev/null || fail "control: headsplit on the good model"

# ---- the cases ------------------------------------------------------------------------------------

names=() pats=() cmds=()
# case NAME PATTERN CMD...: PATTERN (grep -E) must match the one error line.
case_() { names+=("$1"); pats+=("$2"); shift 2; cmds+=("$(printf '%q ' "$@")"); }
HSM=("$HS" --steps 4 --quiet --model)

# command line of headsplit
case_ "steps 0"                "--steps"              "${HSM[@]}" "$T/good.h5" --steps 0
case_ "steps -1"               "--steps"              "${HSM[@]}" "$T/good.h5" --steps -1
case_ "steps abc"              "--steps"              "${HSM[@]}" "$T/good.h5" --steps abc
case_ "temperature -1"         "--temperature"        "${HSM[@]}" "$T/good.h5" --temperature -1
case_ "top-p 2"                "--top-p"              "${HSM[@]}" "$T/good.h5" --top-p 2
case_ "seed -5"                "--seed"               "${HSM[@]}" "$T/good.h5" --seed -5
case_ "mem-budget xyz"         "--mem-budget"         "${HSM[@]}" "$T/good.h5" --mem-budget xyz
case_ "partition diagonal"     "--partition"          "${HSM[@]}" "$T/good.h5" --partition diagonal
case_ "unknown option"         "--bogus"              "${HSM[@]}" "$T/good.h5" --bogus
case_ "option without value"   "--prompt"             "${HSM[@]}" "$T/good.h5" --prompt
case_ "stray argument"         "extra"                "${HSM[@]}" "$T/good.h5" extra
case_ "missing --model"        "--model"              "$HS" --steps 4
case_ "resume: no such file"    "--resume.*nosuch.txt" "${HSM[@]}" "$T/good.h5" --resume "$T/nosuch.txt"
case_ "resume: not a transcript" "notrans.txt.*transcript" "${HSM[@]}" "$T/good.h5" --resume "$T/notrans.txt"
case_ "resume: id 99999"       "badid.txt:4.*99999"  "${HSM[@]}" "$T/good.h5" --resume "$T/badid.txt"
case_ "resume: no prompt"      "noprompt.txt.*prompt" "${HSM[@]}" "$T/good.h5" --resume "$T/noprompt.txt"
case_ "prompt beyond context"  "--prompt.*context"    "${HSM[@]}" "$T/good.h5" --steps 2048 --prompt "$long_prompt"
# model files
case_ "model missing"          "nosuch.h5"            "${HSM[@]}" "$T/nosuch.h5"
case_ "model empty"            "empty.h5"             "${HSM[@]}" "$T/empty.h5"
case_ "model is text"          "text.h5.*HDF5"        "${HSM[@]}" "$T/text.h5"
case_ "HDF5 truncated (meta)"  "trunc_meta.h5"        "${HSM[@]}" "$T/trunc_meta.h5"
case_ "HDF5 truncated (data)"  "trunc_data.h5"        "${HSM[@]}" "$T/trunc_data.h5"
case_ "HDF5 bad signature"     "badsig.h5"            "${HSM[@]}" "$T/badsig.h5"
case_ "format_version 3"       "format_version"       "${HSM[@]}" "$T/fv3.h5"
case_ "v2 lacks quantization"  "quantization"         "${HSM[@]}" "$T/fv2.h5"
case_ "format_version missing" "format_version"       "${HSM[@]}" "$T/fvnone.h5"
case_ "n_kv_heads 3 of 8"      "n_kv_heads"           "${HSM[@]}" "$T/kv3.h5"
case_ "dim negative"           "dim"                  "${HSM[@]}" "$T/negdim.h5"
case_ "dim beyond int"         "dim"                  "${HSM[@]}" "$T/hugedim.h5"
case_ "vocab_size 2^24+1"      "vocab_size"           "${HSM[@]}" "$T/bigvocab.h5"
case_ "vocab_size 0"           "vocab_size"           "${HSM[@]}" "$T/vocab0.h5"
case_ "context_length -1"      "context_length"       "${HSM[@]}" "$T/negctx.h5"
case_ "norm_eps 5"             "norm_eps"             "${HSM[@]}" "$T/eps.h5"
case_ "rope_theta NaN"         "rope_theta"           "${HSM[@]}" "$T/theta.h5"
case_ "architecture bert"      "architecture"         "${HSM[@]}" "$T/arch.h5"
case_ "rope_style spiral"      "rope_style"           "${HSM[@]}" "$T/rope.h5"
case_ "bos_id outside vocab"   "bos_id"               "${HSM[@]}" "$T/bos.h5"
case_ "dim is a string"        "dim"                  "${HSM[@]}" "$T/dimstr.h5"
case_ "embed wrong shape"      "/embed"               "${HSM[@]}" "$T/embshape.h5"
case_ "dim 2^20, data for 64"  "/embed.*1048576"      "${HSM[@]}" "$T/dimbig.h5"
case_ "wq wrong rank"          "/layers/0/wq"         "${HSM[@]}" "$T/wqrank.h5"
case_ "wk wrong dims"          "/layers/2/wk"         "${HSM[@]}" "$T/wkshape.h5"
case_ "final_norm missing"     "/final_norm"          "${HSM[@]}" "$T/nofinal.h5"
case_ "final_norm int32"       "/final_norm"          "${HSM[@]}" "$T/finalint.h5"
case_ "tokenizer missing"      "tokenizer"            "${HSM[@]}" "$T/notok.h5"
case_ "tokenizer vocab 600"    "tokenizer.*600|600.*vocab" "${HSM[@]}" "$T/tokvocab.h5"
# tokenizer group (headsplit-tokenize reads only /tokenizer)
case_ "tok: kind wordpiece"    "kind"                 "$TOKENIZE" --model "$T/tokkind.h5" hello
case_ "tok: merge id 70000"    "merges"               "$TOKENIZE" --model "$T/tokmerge.h5" hello
case_ "tok: offsets decrease"  "piece_offsets"        "$TOKENIZE" --model "$T/tokoffs.h5" hello
case_ "tok: offsets past end"  "piece_offsets"        "$TOKENIZE" --model "$T/tokend.h5" hello
case_ "tok: bos_id 512"        "bos_id"               "$TOKENIZE" --model "$T/tokbos.h5" hello
case_ "tok: scores short"      "scores"               "$TOKENIZE" --model "$T/tokscores.h5" hello
case_ "tok: decode id 99999"   "--decode.*99999"      "$TOKENIZE" --model "$T/good.h5" --decode 1 99999
case_ "tok: decode abc"        "--decode.*abc"        "$TOKENIZE" --model "$T/good.h5" --decode abc
case_ "tok: unknown option"    "--frobnicate"         "$TOKENIZE" --model "$T/good.h5" --frobnicate
case_ "tok: no text"           "TEXT"                 "$TOKENIZE" --model "$T/good.h5"
# llama2.c checkpoints and tokenizer.bin
L2C=("$CONVERT" --format llama2c --out "$T/out.h5" --checkpoint)
case_ "llama2c truncated"      "trunc.bin.*size"      "${L2C[@]}" "$T/trunc.bin" --tokenizer "$T/tok32.bin"
case_ "llama2c -vocab, no cls" "negvocab.bin.*classifier" "${L2C[@]}" "$T/negvocab.bin" --tokenizer "$T/tok32.bin"
case_ "llama2c kv 3 of 2"      "kvdiv.bin.*n_kv_heads" "${L2C[@]}" "$T/kvdiv.bin" --tokenizer "$T/tok32.bin"
case_ "llama2c dim 9 heads 2"  "dimdiv.bin.*dim"      "${L2C[@]}" "$T/dimdiv.bin" --tokenizer "$T/tok32.bin"
case_ "llama2c hidden 0"       "zero.bin.*hidden_dim" "${L2C[@]}" "$T/zero.bin" --tokenizer "$T/tok32.bin"
case_ "llama2c dim 2^31-1"     "huge.bin.*dim"        "${L2C[@]}" "$T/huge.bin" --tokenizer "$T/tok32.bin"
case_ "llama2c 10-byte file"   "short.bin.*header"    "${L2C[@]}" "$T/short.bin" --tokenizer "$T/tok32.bin"
case_ "llama2c ak42 export"    "magic.bin.*ak42"      "${L2C[@]}" "$T/magic.bin" --tokenizer "$T/tok32.bin"
case_ "tokenizer.bin 31 of 32" "tok31.bin"            "${L2C[@]}" "$T/ok.bin" --tokenizer "$T/tok31.bin"
case_ "tokenizer.bin len -5"   "tokneg.bin.*length"   "${L2C[@]}" "$T/ok.bin" --tokenizer "$T/tokneg.bin"
case_ "tokenizer.bin truncated" "toktrunc.bin.*truncated" "${L2C[@]}" "$T/ok.bin" --tokenizer "$T/toktrunc.bin"
case_ "tokenizer.bin max_len 0" "tokmax.bin.*max_token_length" "${L2C[@]}" "$T/ok.bin" --tokenizer "$T/tokmax.bin"
case_ "llama2c no --tokenizer" "--tokenizer"          "${L2C[@]}" "$T/ok.bin"
# Hugging Face directories
HFC=("$CONVERT" --format hf --out "$T/out.h5" --dir)
case_ "st header past EOF"     "hf_hlen.*header length" "${HFC[@]}" "$T/hf_hlen"
case_ "st offsets past data"   "hf_offs.*data_offsets" "${HFC[@]}" "$T/hf_offs"
case_ "st overlapping tensors" "hf_overlap.*overlap"  "${HFC[@]}" "$T/hf_overlap"
case_ "st dtype I64"           "hf_dtype.*dtype"      "${HFC[@]}" "$T/hf_dtype"
case_ "st header not JSON"     "hf_json.*header"      "${HFC[@]}" "$T/hf_json"
case_ "st span != shape"       "hf_span.*data_offsets" "${HFC[@]}" "$T/hf_span"
case_ "st tensor wrong shape"  "hf_shape.*input_layernorm.*shape" "${HFC[@]}" "$T/hf_shape"
case_ "st shard path escapes"  "hf_shard.*weight_map" "${HFC[@]}" "$T/hf_shard"
case_ "st no weights"          "hf_none.*safetensors" "${HFC[@]}" "$T/hf_none"
case_ "config.json keys"       "hf_keys.*config.json" "${HFC[@]}" "$T/hf_keys"
case_ "config.json invalid"    "hf_cfgjson.*config.json" "${HFC[@]}" "$T/hf_cfgjson"
case_ "tokenizer.json invalid" "tokjson.*tokenizer.json" "$CONVERT" --synthetic "llama:vocab=512" --tokenizer "$T/tokjson/tokenizer.json" --out "$T/out.h5"
case_ "tokenizer.json id gap"  "tokjson2.*vocab"      "$CONVERT" --synthetic "llama:vocab=512" --tokenizer "$T/tokjson2/tokenizer.json" --out "$T/out.h5"
# converter command line
case_ "convert unknown option" "--frobnicate"         "$CONVERT" --frobnicate
case_ "convert format xyz"     "--format.*xyz"        "$CONVERT" --format xyz --out "$T/out.h5"
case_ "convert no --out"       "--out"                "$CONVERT" --synthetic stories260k
case_ "convert bad spec"       "dim"                  "$CONVERT" --synthetic "llama:dim=abc" --out "$T/out.h5"
case_ "convert --layers 0"     "--layers"             "$CONVERT" --synthetic stories260k --layers 0 --out "$T/out.h5"
case_ "convert --seed -1"      "--seed"               "$CONVERT" --synthetic stories260k --seed -1 --out "$T/out.h5"
case_ "convert --quantize q5"  "--quantize.*q5"       "$CONVERT" --synthetic stories260k --quantize q5 --out "$T/out.h5"
case_ "convert --out bad dir"  "nodir"                "$CONVERT" --synthetic stories260k --out "$T/nodir/x.h5"

t_inputs=$(date +%s)
# ---- run (in parallel: each headsplit start costs about a second of MPI set-up) ---------------

run_case() { # run_case I: runs case I into $T/c.I.{rc,err}
  local i=$1
  set +e
  # A private TMPDIR: Open MPI singletons starting together race on their session directory.
  mkdir -p "$T/tmp.$i"
  case ${cmds[$i]} in
    "$(printf '%q' "$HS") "*) export ASAN_OPTIONS="$HS_ASAN" ;;
  esac
  TMPDIR="$T/tmp.$i" eval "timeout -k 5 60 ${cmds[$i]}" > "$T/c.$i.out" 2> "$T/c.$i.err" \
    < /dev/null
  echo $? > "$T/c.$i.rc"
}
n=${#names[@]}
for (( i = 0; i < n; i++ )); do
  run_case "$i" &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done
wait

passed=0 failed=0
printf '%-26s %4s  %s\n' "case" "exit" "first error line"
for (( i = 0; i < n; i++ )); do
  rc=$(cat "$T/c.$i.rc")
  errf="$T/c.$i.err"
  line=$(grep -m1 -i 'error' "$errf" || head -n1 "$errf" || true)
  why=""
  if [ "$rc" -eq 0 ]; then why="exit status 0"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then why="timed out"
  elif [ "$rc" -ge 128 ]; then why="killed by a signal"
  elif grep -qE 'Sanitizer|runtime error:|HDF5-DIAG' "$errf"; then why="sanitizer or HDF5 report"
  elif [ "$(grep -ci 'error' "$errf")" -ne 1 ]; then why="$(grep -ci 'error' "$errf") error lines"
  elif [ "$(awk '/^usage:/ { exit } NF { n++ } END { print n + 0 }' "$errf")" -ne 1 ]; then
    why="the message is not one line"
  elif ! grep -i 'error' "$errf" | grep -qE -- "${pats[$i]}"; then why="message lacks /${pats[$i]}/"
  fi
  printf '%-26s %4s  %s\n' "${names[$i]}" "$rc" "${line:0:150}"
  if [ -n "$why" ]; then
    failed=$((failed + 1))
    echo "  FAIL: $why: ${cmds[$i]:0:300}"
    sed 's/^/    | /' "$errf" | head -20
  else
    passed=$((passed + 1))
  fi
done
echo "$passed passed, $failed failed ($(( t_inputs - t_start )) s making inputs, $(( $(date +%s) - t_inputs )) s running)"
[ "$failed" -eq 0 ] || exit 1
echo "PASS: bad inputs end with a clear error"
