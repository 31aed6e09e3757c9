#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a C file defining `const char NAME[]`: the bytes of a file and a NUL."""
import sys


def main():
    src, out, name = sys.argv[1:4]
    data = open(src, 'rb').read()
    if b'\0' in data:
        sys.exit(f'{src}: holds a NUL byte')
    lines = [f'/* generated from {src.rsplit("/", 1)[-1]} by embed.py */',
             '#include <stddef.h>',
             f'extern const char {name}[];',
             f'const char {name}[] = {{']
    for i in range(0, len(data), 16):
        lines.append('    ' + ' '.join(f'{b},' for b in data[i:i + 16]))
    lines.append('    0,')
    lines.append('};')
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
