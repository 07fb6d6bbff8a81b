package activator

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// ReasonScrapeRefused is the reason of the Warning event on a Function
// whose replicas refuse the leader's plaintext scrapes the way a service
// mesh with STRICT mutual TLS does.
const ReasonScrapeRefused = "ScrapeRefused"

// ScrapeRefusedGuide is the troubleshooting guide the event points to.
const ScrapeRefusedGuide = "https://kyma-project.io/#/serverless-manager/user/troubleshooting/03-59-scrape-refused-by-mesh"

// scrapeRefusedEvery bounds the events of one Function: a mesh refuses
// every round, and a Function needs to be told once in a while, not each
// scrape interval.
const scrapeRefusedEvery = 10 * time.Minute

// The causes PlaintextRefusal names.
const (
	refusedConnection = "connection refused"
	resetConnection   = "connection reset"
	closedConnection  = "connection closed without an answer"
	answersTLS        = "the replica answers only TLS"
	sidecarCannot     = "the activator's sidecar could not reach the replica"
)

// errAnswersTLS is a replica whose HTTP answer says that it wanted TLS.
var errAnswersTLS = errors.New("the replica answered that it expects TLS")

// errSidecarFailed is, in mesh mode, the activator's own sidecar answering
// that the replica refused or reset its connection: what a replica's
// sidecar in STRICT mode does to a request the activator's sidecar did not
// wrap in mutual TLS (it did not route it by the private Service).
var errSidecarFailed = errors.New("the activator's sidecar answered that the replica refused it")

// sidecarAnswers start the body of the 503 that Envoy, Istio's sidecar,
// answers when it could not get an answer from the upstream it chose.
var sidecarAnswers = []string{"upstream connect error or disconnect/reset before headers"}

// tlsOnlyAnswers are what TLS servers answer a plaintext HTTP request
// with, in a 400: Go's net/http and nginx.
var tlsOnlyAnswers = []string{"HTTP request to an HTTPS server", "plain HTTP request was sent to HTTPS port"}

// tlsRecords start a malformed response that is a TLS record: an alert
// (0x15) or a handshake (0x16) of TLS 1.x, as Go's transport quotes them.
var tlsRecords = []string{`malformed HTTP response "\x15\x03`, `malformed HTTP response "\x16\x03`}

// ScrapeError is a failed scrape of one replica.
type ScrapeError struct {
	// Replica is the replica's address and port.
	Replica string
	Err     error
}

func (e *ScrapeError) Error() string { return fmt.Sprintf("scraping %s: %v", e.Replica, e.Err) }

func (e *ScrapeError) Unwrap() error { return e.Err }

// PlaintextRefusal names how a replica refused a plaintext scrape, when it
// did so the way a sidecar or node proxy of a service mesh with STRICT
// mutual TLS does: the connection refused, reset or closed without an
// answer, or an answer in TLS. It is "" for any other failure (a timeout,
// a status other than 200, metrics that do not parse), which a mesh does
// not cause.
func PlaintextRefusal(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return refusedConnection
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return resetConnection
	case errors.Is(err, errAnswersTLS):
		return answersTLS
	case errors.Is(err, errSidecarFailed):
		return sidecarCannot
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return closedConnection
	}
	// Go's transport reports a TLS record in place of a status line only
	// in its message.
	msg := err.Error()
	for _, r := range tlsRecords {
		if strings.Contains(msg, r) {
			return answersTLS
		}
	}
	return ""
}

// answeredTLSOnly reports whether a 400's body is a TLS server's answer to
// plaintext.
func answeredTLSOnly(status int, body []byte) bool {
	return status == 400 && containsAny(body, tlsOnlyAnswers)
}

// sidecarFailed reports whether a 503's body is the activator's sidecar
// saying that the upstream failed (mesh mode).
func sidecarFailed(status int, body []byte) bool {
	return status == 503 && containsAny(body, sidecarAnswers)
}

// containsAny reports whether body contains one of answers.
func containsAny(body []byte, answers []string) bool {
	return slices.ContainsFunc(answers, func(a string) bool { return strings.Contains(string(body), a) })
}

// meshScrapeRefusedNote is the event's note in mesh mode: the replica, the
// cause, and what mesh mode needs (the activator's sidecar, the
// Function's private Service listing the replica).
func meshScrapeRefusedNote(fn types.NamespacedName, replica, cause string) string {
	return fmt.Sprintf("cannot scrape replica %s of Function %s: %s: in mesh mode the activator's Istio sidecar reaches the "+
		"replica by the Host %s, the Function's private Service; the Function is kept running and never scaled to zero; "+
		"check that the activator's Pods run the istio-proxy container and that Service %s lists the replica, or see %s",
		replica, fn, cause, scaletozero.MeshAuthority(fn.Namespace, fn.Name), scaletozero.PrivateServiceName(fn.Name), ScrapeRefusedGuide)
}

// scrapeRefusedNote is the event's note: the replica, the cause and the
// fix. 8080 is scaletozero.RuntimePort, spelled out so the guide can quote the note.
func scrapeRefusedNote(fn, replica, cause string) string {
	return fmt.Sprintf("cannot scrape replica %s of Function %s: %s: a service mesh with STRICT mutual TLS refuses "+
		"the activator's plaintext requests, so the Function is kept running and never scaled to zero; "+
		"allow plaintext on the Function's port 8080 (PeerAuthentication portLevelMtls 8080: PERMISSIVE), or see %s",
		replica, fn, cause, ScrapeRefusedGuide)
}
