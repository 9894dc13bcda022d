//go:build unix

package txn_test

import (
	"fmt"
	"os"

	"github.com/scopedpm/scopedpm/txn"
)

// Accounts in a directory: transfers are atomic and durable when they
// return, a batch is all or nothing, and the balances are there after
// Close and OpenDir.
func ExampleOpenDir() {
	dir, err := os.MkdirTemp("", "txn-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	a, err := txn.OpenDir(dir, &txn.DirOptions{Accounts: 3, Balance: 100})
	if err != nil {
		panic(err)
	}
	if err := a.Transfer(0, 1, 40); err != nil { // durable when it returns
		panic(err)
	}
	err = a.TransferBatch([]txn.Transfer{ // one transaction, one sync
		{From: 1, To: 2, Amount: 140},
		{From: 0, To: 2, Amount: 61}, // account 0 holds 60: the batch fails whole
	})
	fmt.Println(err)
	if err := a.Close(); err != nil {
		panic(err)
	}

	a, err = txn.OpenDir(dir, nil)
	if err != nil {
		panic(err)
	}
	defer a.Close()
	for id := range uint64(3) {
		b, _ := a.Balance(id)
		fmt.Println(id, b)
	}
	// Output:
	// txn: insufficient funds: transfer 1 of 61 from account 0, which holds 60
	// 0 60
	// 1 140
	// 2 100
}
