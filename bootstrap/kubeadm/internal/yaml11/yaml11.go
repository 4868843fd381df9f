/*
Copyright The cabpk-formats Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package yaml11 writes YAML scalars that YAML 1.1 loaders (cloud-init's
// PyYAML) and YAML 1.2 loaders both read back as exactly the string that was
// written, whatever it holds: keywords YAML 1.1 turns into booleans or
// numbers, colons, '#', leading spaces, control characters, Unicode line
// separators. It appends to a byte slice so that renderers can write a whole
// document in one pass, at about the cost of copying it.
//
// Styles, most readable first: plain for short words that no resolver
// changes; a literal block (|) for multi-line text that survives it
// unchanged (PEM, kubeadm configuration, scripts); double-quoted with escapes
// for everything else.
package yaml11

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// AppendString appends s as the value of a mapping key or sequence item,
// starting right after the "key:" or "-" (it writes the separating space) and
// ending with a newline. indent is the column of that key or dash; a block
// scalar's lines are indented two columns further.
func AppendString(b []byte, s string, indent int) []byte {
	if isPlainSafe(s) {
		b = append(b, ' ')
		b = append(b, s...)
		return append(b, '\n')
	}
	if out, ok := appendLiteral(b, s, indent); ok {
		return out
	}
	b = append(b, ' ')
	b = AppendQuoted(b, s)
	return append(b, '\n')
}

// AppendInt appends an integer value (after "key:" or "-").
func AppendInt(b []byte, n int64) []byte {
	b = append(b, ' ')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\n')
}

// AppendBool appends a boolean value (after "key:" or "-").
func AppendBool(b []byte, v bool) []byte {
	b = append(b, ' ')
	b = strconv.AppendBool(b, v)
	return append(b, '\n')
}

const spaces = "                                "

// AppendIndent appends n spaces.
func AppendIndent(b []byte, n int) []byte {
	for n > len(spaces) {
		b = append(b, spaces...)
		n -= len(spaces)
	}
	return append(b, spaces[:n]...)
}

// yaml11Keywords are the plain scalars that a YAML 1.1 loader does not read
// as strings (booleans and null), lower-cased; PyYAML also takes their
// capitalised and upper-case forms.
var yaml11Keywords = map[string]bool{
	"y": true, "yes": true, "n": true, "no": true, "true": true, "false": true,
	"on": true, "off": true, "null": true, "~": true,
}

// isPlainSafe is deliberately narrow: non-empty, at most 128 bytes of
// letters, digits and _ . / - @ +, starting with a letter or '/', and not a
// YAML 1.1 keyword. Such a string cannot be a number, a timestamp, a merge
// key, an alias, a tag, a comment or an indicator in any YAML version.
func isPlainSafe(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	c := s[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '/') {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' || c == '-' || c == '@' || c == '+') {
			return false
		}
	}
	if len(s) <= 5 {
		var lower [5]byte
		for i := range len(s) {
			c := s[i]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		if yaml11Keywords[string(lower[:len(s)])] {
			return false
		}
	}
	return true
}

// appendLiteral writes s as a literal block ("|2" with the chomping
// indicator its trailing line breaks need, then its lines indented by
// indent+2) when that reads back unchanged, and reports whether it did; on
// false b is returned as it came. Checking and writing happen in one pass.
//
// A literal block reads back unchanged when s has a line break and text, holds
// no character a loader would change or refuse in a block (carriage returns
// and the other line separators, which loaders normalise; non-printable
// characters; a byte order mark), and its last line is not blank (a blank
// last line would be read as part of the trailing line breaks).
func appendLiteral(b []byte, s string, indent int) ([]byte, bool) {
	trailing := 0
	for trailing < len(s) && s[len(s)-1-trailing] == '\n' {
		trailing++
	}
	body := s[:len(s)-trailing]
	if body == "" || trailing == 0 && strings.IndexByte(body, '\n') < 0 {
		return b, false
	}
	last := body[strings.LastIndexByte(body, '\n')+1:]
	if strings.Trim(last, " \t") == "" {
		return b, false
	}
	start := len(b)
	b = append(b, " |2"...)
	switch trailing {
	case 0:
		b = append(b, '-')
	case 1:
	default:
		b = append(b, '+')
	}
	b = append(b, '\n')
	// One scan finds the line breaks and checks every character; each line is
	// then copied behind its indentation.
	lineStart := 0
	pad := spaces[:min(indent+2, len(spaces))]
	for i := 0; i < len(body); {
		// Sixteen bytes of printable ASCII at a time: the bulk of any PEM,
		// kubeadm configuration or script.
		if i+16 <= len(body) {
			w := body[i : i+16]
			if plainASCIIWords(
				uint64(w[0])|uint64(w[1])<<8|uint64(w[2])<<16|uint64(w[3])<<24|uint64(w[4])<<32|uint64(w[5])<<40|uint64(w[6])<<48|uint64(w[7])<<56,
				uint64(w[8])|uint64(w[9])<<8|uint64(w[10])<<16|uint64(w[11])<<24|uint64(w[12])<<32|uint64(w[13])<<40|uint64(w[14])<<48|uint64(w[15])<<56) {
				i += 16
				continue
			}
		}
		c := body[i]
		switch {
		case c == '\n':
			if i > lineStart {
				b = append(b, pad...)
				b = append(b, body[lineStart:i]...)
			}
			b = append(b, '\n')
			i++
			lineStart = i
		case c == '\t' || c >= 0x20 && c < 0x7f:
			i++
		case c < utf8.RuneSelf:
			return b[:start], false
		default:
			r, size := utf8.DecodeRuneInString(body[i:])
			if !printableNonASCII(r) || r == utf8.RuneError && size == 1 {
				return b[:start], false
			}
			i += size
		}
	}
	b = append(b, pad...)
	b = append(b, body[lineStart:]...)
	b = append(b, '\n')
	// Trailing line breaks beyond the first are empty lines (kept by '+').
	for range trailing - 1 {
		b = append(b, '\n')
	}
	return b, true
}

// plainASCIIWords reports whether the 16 bytes of w1 and w2 are all
// printable ASCII (0x20-0x7E), testing them together.
func plainASCIIWords(w1, w2 uint64) bool {
	const high, ones = 0x8080808080808080, 0x0101010101010101
	d1, d2 := w1^0x7f*ones, w2^0x7f*ones
	// Not ASCII, a control character, or DEL.
	return (w1|w2)&high == 0 &&
		((w1-0x20*ones)&^w1|(w2-0x20*ones)&^w2|(d1-ones)&^d1|(d2-ones)&^d2)&high == 0
}

// printableNonASCII is YAML's printable set above ASCII, minus the characters
// loaders treat as line breaks (NEL, LS, PS) and the byte order mark.
func printableNonASCII(r rune) bool {
	switch {
	case r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xFEFF:
		return false
	case r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

const hexDigits = "0123456789ABCDEF"

// AppendQuoted appends s as a double-quoted scalar, escaping what YAML 1.1
// and 1.2 would not read back as itself: quotes, backslashes, every control
// character (line breaks included, so that nothing is folded), NEL, LS, PS,
// the byte order mark and invalid UTF-8 (as U+FFFD, which is what any YAML
// loader would have to make of it).
func AppendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\n':
				b = append(b, '\\', 'n')
			case '\t':
				b = append(b, '\\', 't')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if printableNonASCII(r) && !(r == utf8.RuneError && size == 1) {
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		if r == utf8.RuneError && size == 1 {
			r = utf8.RuneError
		}
		b = append(b, '\\', 'u')
		for shift := 12; shift >= 0; shift -= 4 {
			b = append(b, hexDigits[(r>>shift)&0xF])
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
