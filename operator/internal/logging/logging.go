// Package logging builds the manager's logger and lets its level change at
// run time through a small YAML file (`logLevel: debug`), e.g. a mounted
// ConfigMap, without a restart.
package logging

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"
)

// New returns a logger writing JSON (format "json") or human-readable
// console lines (format "console") at level to stderr, and the level handle.
func New(level, format string) (logr.Logger, zap.AtomicLevel, error) {
	return NewTo(os.Stderr, level, format)
}

// NewTo is New writing to w. Both formats log alike but for the encoding:
// zap's development mode, which would make a DPanic entry (logr's answer to
// malformed key-value pairs) crash the process, is never on.
func NewTo(w io.Writer, level, format string) (logr.Logger, zap.AtomicLevel, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return logr.Logger{}, zap.AtomicLevel{}, fmt.Errorf("log level %q: %w", level, err)
	}
	atomic := zap.NewAtomicLevelAt(lvl)
	opts := []crzap.Opts{crzap.UseDevMode(false), crzap.WriteTo(w)}
	switch format {
	case "json":
	case "console":
		// Stack traces only for panics: a console reader wants the line.
		opts = append(opts, crzap.ConsoleEncoder(), crzap.StacktraceLevel(zapcore.PanicLevel))
	default:
		return logr.Logger{}, zap.AtomicLevel{}, fmt.Errorf("log format %q: want json or console", format)
	}
	opts = append(opts, crzap.Level(atomic))
	return crzap.New(opts...), atomic, nil
}

// fileConfig is the run-time configuration file.
type fileConfig struct {
	LogLevel string `json:"logLevel"`
}

// ApplyFile sets the level from the file at path.
func ApplyFile(path string, level zap.AtomicLevel) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg fileConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	if strings.TrimSpace(cfg.LogLevel) == "" {
		return nil
	}
	lvl, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return fmt.Errorf("%s: log level %q: %w", path, cfg.LogLevel, err)
	}
	level.SetLevel(lvl)
	return nil
}

// Watch applies the file now and after every change until ctx ends. It
// watches the directory, so that ConfigMap volume updates (a symlink swap)
// are seen too.
func Watch(ctx context.Context, path string, level zap.AtomicLevel, log logr.Logger) error {
	if err := ApplyFile(path, level); err != nil && !os.IsNotExist(err) {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		_ = w.Close()
		return err
	}
	go func() {
		defer func() { _ = w.Close() }()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				before := level.Level()
				if err := ApplyFile(path, level); err != nil && !os.IsNotExist(err) {
					log.Error(err, "reading the log configuration")
				} else if level.Level() != before {
					log.Info("log level changed", "level", level.Level().String())
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Error(err, "watching the log configuration")
			}
		}
	}()
	return nil
}
