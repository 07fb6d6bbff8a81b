package values

import (
	"fmt"
	"strconv"
	"strings"
)

// NodePortRange is the API server's --service-node-port-range, inclusive.
type NodePortRange struct{ Min, Max int32 }

// DefaultNodePortRange is Kubernetes' default NodePort range.
func DefaultNodePortRange() NodePortRange { return NodePortRange{Min: 30000, Max: 32767} }

// ParseNodePortRange reads "min-max" as the API server's flag writes it.
func ParseNodePortRange(s string) (NodePortRange, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return NodePortRange{}, fmt.Errorf("node port range %q: want min-max", s)
	}
	minPort, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 32)
	maxPort, err2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 32)
	if err1 != nil || err2 != nil || minPort < 1 || maxPort > 65535 || minPort > maxPort {
		return NodePortRange{}, fmt.Errorf("node port range %q: want min-max with 1 <= min <= max <= 65535", s)
	}
	return NodePortRange{Min: int32(minPort), Max: int32(maxPort)}, nil
}

// Contains tells whether port is in the range.
func (r NodePortRange) Contains(port int32) bool { return port >= r.Min && port <= r.Max }

// String writes the range as the API server's flag does.
func (r NodePortRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// PickNodePort returns the default registry port when it is free and in
// the range, else the first free port above it (or above the range's start
// when the default lies outside), wrapping around; 0 when all are taken.
func PickNodePort(used map[int32]bool, r NodePortRange) int32 {
	start := int32(DefaultRegistryNodePort)
	if !r.Contains(start) {
		start = r.Min
	}
	size := r.Max - r.Min + 1
	for i := int32(0); i < size; i++ {
		p := start + i
		if p > r.Max {
			p -= size
		}
		if !used[p] {
			return p
		}
	}
	return 0
}
