"""The macro layer of the semantics: which vendor macros expand from their macros.def text, and which are
primitives of the core model.

macros.def gives each macro's body but not its parameter list (the C macros that hold them are the
simulator's own); PARAMS states the parameter order, read off the vendor's call sites. Such macros expand
textually (with `##` pasting), recursively, before parsing. Everything the bodies reach that is simulator
machinery (register files, memory, the branch and the predicate logs) is a primitive: `PRIMITIVES` names
them with their C result type, and the lowering turns their calls into IR primitive nodes that the backend
maps onto the core model.
"""
from __future__ import annotations

_PARAMS = """
f8BITSOF VAL; fABS A; fASHIFTL SRC,SHAMT,REGSTYPE; fASHIFTR SRC,SHAMT,REGSTYPE; fLSHIFTR SRC,SHAMT,REGSTYPE;
fROTL SRC,SHAMT,REGSTYPE; fBIDIR_ASHIFTL SRC,SHAMT,REGSTYPE; fBIDIR_ASHIFTR SRC,SHAMT,REGSTYPE;
fBIDIR_LSHIFTL SRC,SHAMT,REGSTYPE; fBIDIR_LSHIFTR SRC,SHAMT,REGSTYPE; fBIDIR_SHIFTL SRC,SHAMT,REGSTYPE;
fBIDIR_SHIFTR SRC,SHAMT,REGSTYPE; fBIDIR_ASHIFTL_SAT SRC,SHAMT,REGSTYPE; fBIDIR_ASHIFTR_SAT SRC,SHAMT,REGSTYPE;
fSAT_ORIG_SHL A,ORIG_REG; fCARRY_FROM_ADD32 A,B,C; fCAST4_4u A; fCAST4_8s A; fCAST4_8u A; fCAST4s A; fCAST4u A;
fCAST8_8u A; fCAST8s A; fCAST8u A; fCAST2_2s A; fCAST2_2u A; fCAST4_4s A; fCAST8_8s A; fCAST2_8s A; fCAST2_8u A;
fCHECKSFNAN DST,A; fCHECKSFNAN3 DST,A,B,C; fCLIP DST,SRC,U; fCONDMASK8 QREG,IDX,YESVAL,NOVAL;
fCONDMASK16 QREG,IDX,YESVAL,NOVAL; fCONDMASK32 QREG,IDX,YESVAL,NOVAL; fCONSTLL A; fCRND A;
fDF_GETEXP A; fDF_ISBIG X; fDF_MANTBITS; fSF_MANTBITS; fSF_BIAS; fSF_GETEXP A; fMAKESF SIGN,EXP,MANT;
fDF_MAX A,B; fDF_MIN A,B; fSF_MAX A,B; fSF_MIN A,B; fISINFPROD A,B; fISZEROPROD A,B; fSFNANVAL;
fFMAF A,B,C; fFMAFX A,B,C,ADJ; fSFMPY A,B;
fEA_GPI IMM; fEA_IMM IMM; fEA_IRs IMM,REG,SCALE; fEA_REG REG; fEA_RI REG,IMM; fEA_RRs REG,REG2,SCALE;
fEA_BREVR REG; fECHO A; fEXTRACTU_BIDIR INREG,WIDTH,OFFSET; fEXTRACTU_RANGE INREG,HIBIT,LOWBIT;
fFRAME_SCRAMBLE VAL; fFRAME_UNSCRAMBLE VAL; fGET_FRAMEKEY; fGENMASKH QREG,IDX; fGENMASKW QREG,IDX;
fGETBIT N,SRC; fGETBYTE N,SRC; fGETHALF N,SRC; fGETWORD N,SRC; fGETUBYTE N,SRC; fGETUHALF N,SRC; fGETUWORD N,SRC;
fGETQBIT REG,BITNO; fGETQBITS REG,WIDTH,MASK,BITNO; fSETQBIT REG,BITNO,VAL; fSETQBITS REG,WIDTH,MASK,BITNO,VAL;
fIMMEXT IMM; fMUST_IMMEXT IMM; fPCALIGN IMM; fINSERT_BITS REG,WIDTH,OFFSET,INVAL;
fINSERT_RANGE INREG,HIBIT,LOWBIT,INVAL; fLOAD NUM,SIZE,SIGN,EA,DST; fSTORE NUM,SIZE,EA,SRC;
fLSBOLD VAL; fLSBOLDNOT VAL; fLSBNEWNOT PNUM; fLSBNEW0NOT; fLSBNEW1NOT; fMAX A,B; fMIN A,B;
fMPY16SS A,B; fMPY16SU A,B; fMPY16US A,B; fMPY16UU A,B; fMPY3216SS A,B; fMPY3216SU A,B; fMPY32SS A,B;
fMPY32SU A,B; fMPY32UU A,B; fMPY8SS A,B; fMPY8SU A,B; fMPY8US A,B; fMPY8UU A,B; fPASS A; fADDSAT64 DST,A,B;
fPM_I REG,IMM; fPM_M REG,MVAL; fPM_CIRI REG,IMM,MVAL; fPM_CIRR REG,VAL,MVAL;
fREAD_IREG VAL; fREAD_FP; fREAD_LR; fREAD_PC; fREAD_SP; fREAD_LC0; fREAD_LC1;
fREAD_SA0; fREAD_SA1; fREAD_P0; fRNDN A,N; fROUND A; fSAT A; fSATB VAL; fSATH VAL; fSATUB VAL; fSATUH VAL;
fSATN N,VAL; fSATUN N,VAL; fSATVALN N,VAL; fSATUVALN N,VAL; fSATW A; fSET_OVERFLOW; fSCALE N,A;
fSE8_16 A; fSE16_32 A; fSE32_64 A; fZE8_16 A; fZE16_32 A; fZE32_64 A; fSETBIT N,DST,VAL; fSETBITS HI,LO,DST,VAL;
fSETBYTE N,DST,VAL; fSETHALF N,DST,VAL; fSETWORD N,DST,VAL; fSET_LPCFG VAL; fGET_LPCFG; fSWAPB A,B;
fSXTN N,M,VAL; fZXTN N,M,VAL; fVAVGS WIDTH,U,V; fVAVGSRND WIDTH,U,V; fVAVGU WIDTH,U,V; fVAVGURND WIDTH,U,V;
fVNAVGS WIDTH,U,V; fVNAVGU WIDTH,U,V; fVSADDSAT WIDTH,U,V; fVSSUBSAT WIDTH,U,V; fVUADDSAT WIDTH,U,V;
fVUSUBSAT WIDTH,U,V; fVALIGN ADDR,LOG2_ALIGNMENT; fVLASTBYTE ADDR,LOG2_ALIGNMENT;
fVARRAY_ELEMENT_ACCESS ARRAY,TYPE,INDEX; fVBYTES; fVECSIZE; fVELEM WIDTH; fVFOREACH WIDTH,VAR;
fVNOROUND VAL,SHAMT; fVROUND VAL,SHAMT; fVSAT A; fVSATB VAL; fVSATH VAL; fVSATUB VAL; fVSATUH VAL; fVSATW A;
fVSATN N,VAL; fVSATUN N,VAL; fVSATVALN N,VAL; fVSATUVALN N,VAL; fVSATDW U,V;
fWRITE_FP A; fWRITE_LR A; fWRITE_SP A; fWRITE_LC0 VAL; fWRITE_LC1 VAL; fWRITE_LOOP_REGS0 START,COUNT;
fWRITE_LOOP_REGS1 START,COUNT; fWRITE_P0 VAL; fWRITE_P1 VAL; fWRITE_P2 VAL; fWRITE_P3 VAL; fJUMPR REGNO,TARGET,TYPE;
fLOAD_LOCKED NUM,SIZE,SIGN,EA,DST; fSTORE_LOCKED NUM,SIZE,EA,SRC,PRED
"""
PARAMS: dict[str, tuple[str, ...]] = {
    name: tuple(p for p in rest.split(",") if p)
    for name, _, rest in (e.strip().partition(" ") for e in _PARAMS.split(";"))}

# Primitives: simulator machinery the bodies reach, with the C type of their value ("void" for effects).
PRIMITIVES: dict[str, str] = {
    # registers other than the instruction's operands, by REG_ name; predicates by number
    "READ_RREG": "size4u_t", "WRITE_RREG": "void", "READ_PREG": "size1u_t", "WRITE_PREG": "void",
    "GET_USR_FIELD": "size4u_t", "SET_USR_FIELD": "void", "fREAD_GP": "size4u_t", "fREAD_NPC": "size4u_t",
    "fLSBNEW": "size4u_t", "fLSBNEW0": "size4u_t", "fLSBNEW1": "size4u_t",  # the new value of a predicate, bit 0
    "fNEWREG": "size4s_t", "fNEWREG_ST": "size4s_t", "fNEWVREG": "mmvector_t",  # new-value operands: the value
    # memory
    **{f"MEM_LOAD{n}": f"size{n}u_t" for n in (1, 2, 4, 8)}, **{f"MEM_STORE{n}": "void" for n in (1, 2, 4, 8)},
    "fLOADMMV": "void", "fLOADMMVU": "void", "fSTOREMMV": "void", "fSTOREMMVU": "void", "fSTOREMMVQ": "void",
    "fSTOREMMVNQ": "void", "mem_load_locked": "size8u_t", "mem_store_conditional": "int",
    # control flow: a branch target, a call, cancelling the slot (conditional execution fails)
    "fBRANCH": "void", "fCALL": "void", "fCALLR": "void", "CANCEL": "void", "LOAD_CANCEL": "void",
    "STORE_CANCEL": "void", "fTRAP": "void",
    # circular and bit-reversed addressing (need the CS registers and M fields)
    "fcirc_add": "void", "fbrev": "size4u_t",
    # bit counting and wide arithmetic
    "count_leading_ones_2": "int", "count_leading_ones_4": "int", "count_leading_ones_8": "int",
    "count_ones_2": "int", "count_ones_4": "int", "count_ones_8": "int", "reverse_bits_4": "size4u_t",
    "reverse_bits_8": "size8u_t", "fCL1_2": "int", "fCL1_4": "int", "fCL1_8": "int", "fCOUNTONES_2": "int",
    "fCOUNTONES_4": "int", "fCOUNTONES_8": "int", "fBREV_4": "size4u_t", "fBREV_8": "size8u_t",
    "fINTERLEAVE": "size8u_t", "fDEINTERLEAVE": "size8u_t", "fCARRY_FROM_ADD": "size8u_t",
    "fADD128": "size16s_t", "fSUB128": "size16s_t", "fAND128": "size16s_t", "fSHIFTL128": "size16s_t",
    "fSHIFTR128": "size16s_t", "fCAST8S_16S": "size16s_t", "fCAST16S_8S": "size8s_t", "fCRNDN": "size4s_t",
    # floating point: bit casts, host math, the fenv rounding mode
    "fFLOAT": "float", "fUNFLOAT": "size4u_t", "fDOUBLE": "double", "fUNDOUBLE": "size8u_t",
    "isnan": "int", "isinf": "int", "isfinite": "int", "fpclassify": "int", "fmaxf": "float", "fminf": "float",
    "fmax": "double", "fmin": "double", "internal_fmafx": "float", "internal_mpyf": "float",
    "fDF_MPY_HH": "double", "fSF_RECIP_COMMON": "int", "fSF_INVSQRT_COMMON": "int", "fRAISEFLAGS": "void",
    "fSF_RECIP_LOOKUP": "int", "fSF_INVSQRT_LOOKUP": "int",  # seed ROMs (emu.dsp.tables)
    "fFPSETROUND_CHOP": "void", "fFPSETROUND_NEAREST": "void", "fFPCANCELFLAGS": "void",
    "fDF_ISNORMAL": "int", "fDF_ISDENORM": "int", "isunordered": "int",
    **{f"conv_{a}_to_{b}": {"sf": "float", "df": "double"}.get(b, f"size{b[0]}{b[1]}_t")
       for a, b in [(f, i) for f in ("sf", "df") for i in ("4u", "4s", "8u", "8s")]
       + [(i, f) for f in ("sf", "df") for i in ("4u", "4s", "8u", "8s")] + [("sf", "df"), ("df", "sf")]},
    # HVX gather/scatter (VTCM: memory the program mapped; emu.dsp.pyback.VTCM has each macro's arguments)
    **{n: "void" for n in (
        "fGATHER_INIT", "fSCATTER_INIT", "fGATHER_FINISH", "fSCATTER_FINISH", "fLOG_SCATTER_OP",
        *(f"fVLOG_VTCM_GATHER_{k}" for k in ("WORD", "HALFWORD", "HALFWORD_DV", "WORDQ", "HALFWORDQ",
                                             "HALFWORDQ_DV")),
        *(f"fVLOG_VTCM_{k}" for k in ("WORD", "HALFWORD", "HALFWORD_DV", "WORDQ", "HALFWORDQ", "HALFWORDQ_DV",
                                      "WORD_INCREMENT", "HALFWORD_INCREMENT", "HALFWORD_INCREMENT_DV")))},
    # HVX machinery
    "fVECLOGSIZE": "int", "fNOTQ": "mmqreg_t", "fTMPVDATA": "mmvector_t",  # vtmp: the packet's .tmp load
    "READ_EXT_VREG": "mmvector_t", "WRITE_EXT_VREG": "void",  # a vector register by number (vhist)
    # no effect on the architectural state this model keeps (caches, hints, speculation, pipeline notes)
    **{n: "void" for n in (
        "fBRANCH_SPECULATE_STALL", "fHINTJR", "fDOCHKPAGECROSS", "fGP_DOCHKPAGECROSS", "fFRAMECHECK",
        "fCHECK_PCALIGN", "fDCFETCH", "fDCZEROA", "fDCCLEANA", "fDCCLEANINVA", "fDCINVA", "fICINVA",
        "fISYNC", "fBARRIER", "fSYNCH", "fL2FETCH", "fPAUSE", "fUARCH_NOTE_PUMP_2X", "fUARCH_NOTE_PUMP_4X",
        "IV1DEAD", "fCOF_CALLBACK", "fV_AL_CHECK", "fatal", "warn",
        "fSTORERELEASE")},  # orders scatters before later accesses; this model runs them in order
}

# Constant names the bodies use.
CONSTANTS: dict[str, int] = {"PCALIGN_MASK": 3, "FP_NAN": 0, "FP_INFINITE": 1, "FP_ZERO": 2, "FP_SUBNORMAL": 3,
                             "FP_NORMAL": 4}
