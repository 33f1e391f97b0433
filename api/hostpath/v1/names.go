package v1

import (
	"crypto/sha256"
	"encoding/hex"
)

// maxNameLength is the longest object name the API server takes (a DNS
// subdomain).
const maxNameLength = 253

// Name returns the name of the definition of node and pool: "<pool>.<node>",
// or, when that is too long, the pool, a dot, the start of the node name, a
// dash and 16 hex digits of the node name's SHA-256. See the package
// documentation.
func Name(node, pool string) string {
	name := pool + "." + node
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	suffix := "-" + hex.EncodeToString(sum[:8])
	keep := maxNameLength - len(pool) - 1 - len(suffix)
	head := node[:keep]
	for len(head) > 0 && (head[len(head)-1] == '.' || head[len(head)-1] == '-') {
		head = head[:len(head)-1]
	}
	return pool + "." + head + suffix
}
