package store

// QuoteWith returns a function that quotes one identifier part with q (the
// engine's quote character: '"' or '`'), doubling any embedded quote
// character. Identifiers are validated before they are quoted, and the
// alphabet excludes quote characters; the doubling is a second line of
// defence that keeps the output safe even if the alphabet is ever widened.
func QuoteWith(q byte) func(part string) string {
	return func(p string) string {
		b := make([]byte, 0, len(p)+2)
		b = append(b, q)
		for i := 0; i < len(p); i++ {
			if p[i] == q {
				b = append(b, q)
			}
			b = append(b, p[i])
		}
		return string(append(b, q))
	}
}
