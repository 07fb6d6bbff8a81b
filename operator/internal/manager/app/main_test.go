package app_test

import (
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain keeps the controller's logs out of the test output unless
// TEST_LOG=1 asks for them.
func TestMain(m *testing.M) {
	level := zapcore.Level(zapcore.FatalLevel)
	if os.Getenv("TEST_LOG") == "1" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level), zap.WriteTo(os.Stderr)))
	os.Exit(m.Run())
}
