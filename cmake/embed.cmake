# embed.cmake — turns a binary file into a C source with one array, so a
# build-time artifact (a FileDescriptorSet) ships inside the binary.
#   cmake -DIN=<file> -DOUT=<file.c> -DNAME=<symbol> -P embed.cmake
# defines `const unsigned char NAME[]` and `const size_t NAME_len`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" body "${body}")
file(WRITE "${OUT}"
  "/* Generated from ${IN} by cmake/embed.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "const unsigned char ${NAME}[] = {\n${body}\n};\n"
  "const size_t ${NAME}_len = ${bytes};\n")
