// Package governance is how humans approve what agents do when the stakes
// are high: approvers' ML-DSA-65 (FIPS 204) identities, the canonical bytes
// they sign, the policy that says how many signatures a risk level needs
// (m of n), and the tally that counts them. The audit log of every
// decision is package audit.
//
// A top-level package because approval policy is a separate concern of
// the architecture that operators configure and third parties sign for.
package governance

import (
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
)

// PEM block types of the key files.
const (
	privatePEM = "CONCLAVE ML-DSA-65 PRIVATE KEY" // the 32-byte seed (FIPS 204 ξ)
	publicPEM  = "CONCLAVE ML-DSA-65 PUBLIC KEY"  // the packed public key, 1,952 bytes
)

// PublicKey is an approver's (or the server's) ML-DSA-65 public key.
type PublicKey = mldsa65.PublicKey

// PrivateKey is an ML-DSA-65 private key.
type PrivateKey = mldsa65.PrivateKey

// SignatureSize is the size of an ML-DSA-65 signature (3,309 bytes).
const SignatureSize = mldsa65.SignatureSize

var keyName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// GenerateKey makes a key pair from rand (crypto/rand when nil), returning
// its seed too (what the private key file stores).
func GenerateKey(r io.Reader) (*PublicKey, *PrivateKey, [mldsa65.SeedSize]byte, error) {
	if r == nil {
		r = rand.Reader
	}
	var seed [mldsa65.SeedSize]byte
	if _, err := io.ReadFull(r, seed[:]); err != nil {
		return nil, nil, seed, fmt.Errorf("governance: key seed: %w", err)
	}
	pk, sk := mldsa65.NewKeyFromSeed(&seed)
	return pk, sk, seed, nil
}

// WriteKeyPair generates a key pair and writes dir/NAME.key (the private
// key, mode 0600) and dir/NAME.pub. It refuses to overwrite a key file.
func WriteKeyPair(dir, name string) (keyPath, pubPath string, err error) {
	if !keyName.MatchString(name) {
		return "", "", fmt.Errorf("governance: key name %q must match %s", name, keyName)
	}
	pk, _, seed, err := GenerateKey(nil)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("governance: %w", err)
	}
	keyPath, pubPath = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: privatePEM, Bytes: seed[:]}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(pubPath, EncodePublicKey(pk), 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// writeNew writes a file that must not exist yet, and syncs it.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("governance: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("governance: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("governance: sync %s: %w", path, err)
	}
	return f.Close()
}

// EncodePublicKey is the PEM form of a public key (a .pub file).
func EncodePublicKey(pk *PublicKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: publicPEM, Bytes: pk.Bytes()})
}

// ParsePublicKey reads a public key in PEM form.
func ParsePublicKey(b []byte) (*PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != publicPEM {
		return nil, fmt.Errorf("governance: not a %q PEM block", publicPEM)
	}
	if len(blk.Bytes) != mldsa65.PublicKeySize {
		return nil, fmt.Errorf("governance: public key is %d bytes, want %d", len(blk.Bytes), mldsa65.PublicKeySize)
	}
	var pk PublicKey
	if err := pk.UnmarshalBinary(blk.Bytes); err != nil {
		return nil, fmt.Errorf("governance: public key: %w", err)
	}
	return &pk, nil
}

// ReadPublicKey reads a .pub file.
func ReadPublicKey(path string) (*PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	pk, err := ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pk, nil
}

// ErrKeyExposed is returned for a private key file others can read.
var ErrKeyExposed = errors.New("governance: private key file is readable by others (want mode 0600)")

// ReadPrivateKey reads a .key file, refusing one that group or others may
// read.
func ReadPrivateKey(path string) (*PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is %v", ErrKeyExposed, path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != privatePEM || len(blk.Bytes) != mldsa65.SeedSize {
		return nil, fmt.Errorf("governance: %s is not a %q PEM block of a %d-byte seed", path, privatePEM, mldsa65.SeedSize)
	}
	var seed [mldsa65.SeedSize]byte
	copy(seed[:], blk.Bytes)
	_, sk := mldsa65.NewKeyFromSeed(&seed)
	return sk, nil
}

// LoadOrCreateServerKey reads the server's key from path, or creates it
// (mode 0600) with its public key beside it (path with ".pub") if it does
// not exist: the key that signs the audit log.
func LoadOrCreateServerKey(path string) (*PrivateKey, error) {
	if _, err := os.Stat(path); err == nil {
		return ReadPrivateKey(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("governance: %w", err)
	}
	pk, sk, seed, err := GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	if err := writeNew(path, pem.EncodeToMemory(&pem.Block{Type: privatePEM, Bytes: seed[:]}), 0o600); err != nil {
		return nil, err
	}
	pub := path + ".pub"
	if err := os.WriteFile(pub, EncodePublicKey(pk), 0o644); err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	return sk, nil
}
