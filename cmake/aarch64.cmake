# The NEON kernels: scripts/test-aarch64.sh cross-builds the quantized and fp32 kernels for
# aarch64 and runs tests/aarch64/quant_check.c under qemu-user (skips, 77, without the cross
# compiler or qemu).  Kept here, beside the other optional fragments, as one more unit test.
add_test(NAME unit.aarch64_quant
         COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/test-aarch64.sh ${CMAKE_BINARY_DIR}/aarch64)
set_tests_properties(unit.aarch64_quant PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
