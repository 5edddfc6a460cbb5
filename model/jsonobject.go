package model

import "strings"

// JSONObject returns the first JSON object in a model's answer: the text
// from its first '{' to the matching '}', strings and escapes respected.
// Models asked for JSON often wrap it in a Markdown fence (```json … ```)
// or a sentence of prose, which a server without structured output does
// not stop; the director's plan and the steerer's diff are read through
// it. Without a '{' it returns text unchanged; with no matching '}' it
// returns the rest of text from the '{', so the JSON decoder says what is
// wrong.
func JSONObject(text string) string {
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return text
	}
	depth, inString, escaped := 0, false, false
	for i := start; i < len(text); i++ {
		c := text[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return text[start : i+1]
			}
		}
	}
	return text[start:]
}
