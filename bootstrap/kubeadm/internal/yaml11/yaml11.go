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
	switch {
	case isPlainSafe(s):
		b = append(b, ' ')
		b = append(b, s...)
		return append(b, '\n')
	case isBlockSafe(s):
		return appendLiteral(b, s, indent)
	default:
		b = append(b, ' ')
		b = AppendQuoted(b, s)
		return append(b, '\n')
	}
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
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' || c == '-' || c == '@' || c == '+') {
			return false
		}
	}
	if len(s) <= 5 {
		var lower [5]byte
		for i := 0; i < len(s); i++ {
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

// isBlockSafe reports whether s reads back unchanged from a literal block
// with an explicit indentation indicator: it has a line break and something
// else, and holds no character a loader would change or refuse in a block
// (carriage returns and the other line separators, which loaders normalise;
// non-printable characters; a byte order mark).
func isBlockSafe(s string) bool {
	sawBreak, sawText := false, false
	for i := 0; i < len(s); {
		// Eight bytes of printable ASCII at a time: the bulk of any PEM,
		// kubeadm configuration or script.
		if i+8 <= len(s) && plainASCIIWord(s[i:i+8]) {
			sawText = true
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				sawBreak = true
			case c == '\t' || c >= 0x20 && c < 0x7f:
				sawText = true
			default:
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !printableNonASCII(r) || r == utf8.RuneError && size == 1 {
			return false
		}
		sawText = true
		i += size
	}
	if !sawBreak || !sawText {
		return false
	}
	// A line of nothing but spaces or tabs right before the end would be read
	// as part of the trailing line breaks; keep such text quoted.
	end := len(s)
	for end > 0 && s[end-1] == '\n' {
		end--
	}
	for j := end - 1; j >= 0 && s[j] != '\n'; j-- {
		if s[j] != ' ' && s[j] != '\t' {
			return true
		}
	}
	return false
}

// plainASCIIWord reports whether 8 bytes are all printable ASCII (0x20-0x7E),
// testing them together.
func plainASCIIWord(s string) bool {
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const high, ones = 0x8080808080808080, 0x0101010101010101
	if w&high != 0 {
		return false // not ASCII
	}
	if (w-0x20*ones)&^w&high != 0 {
		return false // a control character
	}
	del := w ^ 0x7f*ones
	return (del-ones)&^del&high == 0 // no DEL
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

// appendLiteral writes " |2" (with the chomping indicator the trailing line
// breaks need) and s's lines indented by indent+2.
func appendLiteral(b []byte, s string, indent int) []byte {
	trailing := 0
	for trailing < len(s) && s[len(s)-1-trailing] == '\n' {
		trailing++
	}
	b = append(b, " |2"...)
	switch trailing {
	case 0:
		b = append(b, '-')
	case 1:
	default:
		b = append(b, '+')
	}
	b = append(b, '\n')
	body := s[:len(s)-trailing]
	for {
		line, rest, more := strings.Cut(body, "\n")
		if line != "" {
			b = AppendIndent(b, indent+2)
			b = append(b, line...)
		}
		b = append(b, '\n')
		if !more {
			break
		}
		body = rest
	}
	// Trailing line breaks beyond the first are empty lines (kept by '+').
	for range trailing - 1 {
		b = append(b, '\n')
	}
	return b
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
