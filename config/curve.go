package config

import (
	"errors"
	"fmt"
	"os"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// Keys loads and checks the key pair and the allow-list (reading the key
// files). Call it only when Enabled.
func (c CurveConfig) Keys() (curve.KeyPair, []curve.Key, error) {
	kp, kerr := c.keyPair()
	allowed, aerr := c.allowedKeys()
	if err := errors.Join(kerr, aerr); err != nil {
		return kp, nil, err
	}
	return kp, allowed, nil
}

// unusedKeys refuses CURVE settings given while CURVE is off: they were
// meant to secure the links, which would silently stay plain text (a node
// started with its key files but without enabled ran unencrypted, with no
// word in the log — an operator try-out, 2026-12-06). The Redis TLS keys
// follow the same rule (redistls.go).
func (c CurveConfig) unusedKeys(ps *problems) {
	set := []struct {
		name string
		set  bool
	}{
		{"secret_key_file", c.SecretKeyFile != ""}, {"secret_key", c.SecretKey != ""}, {"public_key", c.PublicKey != ""},
		{"allowed_keys_file", c.AllowedKeysFile != ""}, {"allowed_keys", len(c.AllowedKeys) > 0},
	}
	for _, k := range set {
		if k.set {
			ps.add("transport.curve."+k.name, "is set but transport.curve.enabled is false, so the links would not be encrypted; set transport.curve.enabled: true or remove it")
		}
	}
}

const curveKey = "transport.curve."

// curveKeyError is a problem of one transport.curve key. Validate lists it
// under that key, with the source its value came from (until 2026-12-07
// every CURVE problem was listed under "transport.curve", without the
// file or environment variable that set it, and a missing secret key
// file read "curve: secret key file: stat …" without naming the key).
type curveKeyError struct {
	key string
	err error
}

func keyErr(key string, err error) error { return &curveKeyError{key: key, err: err} }

func (e *curveKeyError) Error() string { return e.key + ": " + e.err.Error() }
func (e *curveKeyError) Unwrap() error { return e.err }

// keyPair loads and checks the node's own key pair.
func (c CurveConfig) keyPair() (curve.KeyPair, error) {
	var kp curve.KeyPair
	var secret curve.Key
	var err error
	key := curveKey + "secret_key_file"
	switch {
	case c.SecretKeyFile != "" && c.SecretKey != "":
		return kp, keyErr(curveKey+"secret_key", errors.New("set transport.curve.secret_key_file or transport.curve.secret_key, not both"))
	case c.SecretKeyFile != "":
		secret, err = curve.ReadSecretKeyFile(c.SecretKeyFile)
	case c.SecretKey != "":
		key = curveKey + "secret_key"
		secret, err = curve.ParseKey(c.SecretKey)
	default:
		return kp, keyErr(key, errors.New("not set: CURVE needs the node's secret key, in transport.curve.secret_key_file or transport.curve.secret_key (see `meshnode ctl keygen`)"))
	}
	if err != nil {
		return kp, keyErr(key, err)
	}
	if kp, err = curve.KeyPairFromSecret(secret); err != nil {
		return kp, keyErr(key, err)
	}
	if c.PublicKey != "" {
		pub, err := curve.ParseKey(c.PublicKey)
		if err != nil {
			return kp, keyErr(curveKey+"public_key", err)
		}
		if pub != kp.Public {
			return kp, keyErr(curveKey+"public_key", fmt.Errorf("%s is not the secret key's public key %s", pub, kp.Public))
		}
	}
	return kp, nil
}

// allowedKeys loads and checks the allow-list (file and inline keys).
func (c CurveConfig) allowedKeys() ([]curve.Key, error) {
	var allowed []curve.Key
	if c.AllowedKeysFile != "" {
		f, err := os.Open(c.AllowedKeysFile)
		if err != nil {
			return nil, keyErr(curveKey+"allowed_keys_file", err)
		}
		defer f.Close()
		// Anyone who can write the allow-list can make this node trust their
		// key (at the next restart): refuse a world-writable one, as the
		// secret key file's mode is checked.
		if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o002 != 0 {
			return nil, keyErr(curveKey+"allowed_keys_file", fmt.Errorf("%s has mode %#o: writable by any user, who could add a key of their own; chmod o-w", c.AllowedKeysFile, st.Mode().Perm()))
		}
		if allowed, err = curve.ParseKeyList(f); err != nil {
			return nil, keyErr(curveKey+"allowed_keys_file", fmt.Errorf("%s: %w", c.AllowedKeysFile, err))
		}
	}
	for i, s := range c.AllowedKeys {
		k, err := curve.ParsePublicKey(s)
		if err != nil {
			return nil, keyErr(curveKey+"allowed_keys", fmt.Errorf("entry %d: %w", i+1, err))
		}
		allowed = append(allowed, k)
	}
	if len(allowed) == 0 {
		key := curveKey + "allowed_keys"
		if c.AllowedKeysFile != "" {
			key = curveKey + "allowed_keys_file"
		}
		return nil, keyErr(key, errors.New("no trusted node keys: transport.curve needs them (allowed_keys_file or allowed_keys); an empty allow-list would refuse every peer"))
	}
	return allowed, nil
}
