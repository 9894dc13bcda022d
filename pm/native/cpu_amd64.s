#include "textflag.h"

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func clwbLines(p unsafe.Pointer, n uintptr)
TEXT ·clwbLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), BX
loop:
	TESTQ BX, BX
	JZ done
	CLWB (AX)
	ADDQ $64, AX
	DECQ BX
	JMP loop
done:
	RET

// func clflushoptLines(p unsafe.Pointer, n uintptr)
TEXT ·clflushoptLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), BX
loop:
	TESTQ BX, BX
	JZ done
	CLFLUSHOPT (AX)
	ADDQ $64, AX
	DECQ BX
	JMP loop
done:
	RET

// func sfence()
TEXT ·sfence(SB), NOSPLIT, $0-0
	SFENCE
	RET
