package values

// NodePortRange is Kubernetes' default NodePort range.
const (
	minNodePort = 30000
	maxNodePort = 32767
)

// PickNodePort returns the default registry port when it is free, else the
// first free port above it, wrapping around the range; 0 when all are taken.
func PickNodePort(used map[int32]bool) int32 {
	for i := int32(0); i <= maxNodePort-minNodePort; i++ {
		p := DefaultRegistryNodePort + i
		if p > maxNodePort {
			p -= maxNodePort - minNodePort + 1
		}
		if !used[p] {
			return p
		}
	}
	return 0
}
