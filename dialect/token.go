package dialect

import (
	"crypto/rand"
	"encoding/base32"
)

// TokenLen is the length of a token from [NewToken]: 26 characters, so it
// fits the VARCHAR(40) columns the design asks for, with room to spare.
const TokenLen = 26

var tokenEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewToken returns 128 random bits from crypto/rand as 26 base32 characters
// (A-Z, 2-7). Claims and lease acquisitions each take a fresh token; a token
// never encodes a host name or process id.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+: it crashes the program instead)
	return tokenEncoding.EncodeToString(b[:])
}
