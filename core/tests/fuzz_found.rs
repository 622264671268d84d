//! Malformed ONNX files found by fuzzing (`scripts/fuzz.sh 60 model_loader`):
//! each is an error naming the problem, never a panic.

use tandem_core::{Error, InputShapes, Model};

/// A 398-byte input on which tract-onnx 0.23.9 panicked ("no entry found
/// for key", its model.rs:187) while parsing.
const TRACT_PANIC: &[&str] = &[
    "0807120e74616e64656d2d74657374696e673af5020a170a01780a0277311201681a0366633122064d61744d756c0a13",
    "0a01681201611a0572656c7531220452656c750a170a01610a0277321201791a0366633222064d61744d756c12047465",
    "73742a8d010a0204081001228001000080bf0ad723bfd8a3703f08d7233e90c2f5bdc2f528bfb81e853e52b81e3f703d",
    "0abf0cd723be0000403f7c142ebeb81e853eb81e053e14ae073fae47613f3433b3bee27a543fec51b83eb04761be9899",
    "993eae4761bfd0cccc3dd0cc4cbd3433733f00d7a3bc00d7a3bc2085bdbe3433333fcccc4c3f000080bf7a14aebe4202",
    "77312a6c0a0208031001226090c2f5bd14ae073f285c8fbdd7a330bf00d723bc9899193e6666263fcccc4c3f10d7a33d",
    "3433b3be1e856b3f9a9919bf5c8f42bf10d7a33d86eb113f50b89e3e7a14aebe7a14aebe5c8f023f48e13a3f08d7233e",
    "000000005c8f42bfb81e453f420277315a130a0178120e0a0c080112080a0248010a02080462130a0179300e0a0c0801",
    "12080a0208010a0208034202100e",
];

fn bytes(hex: &[&str]) -> Vec<u8> {
    let hex: String = hex.concat();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
}

#[test]
fn a_file_on_which_tracts_parser_panics_is_an_error() {
    let data = bytes(TRACT_PANIC);
    assert_eq!(data.len(), 398);
    match Model::from_bytes(&data, &InputShapes::none()) {
        Err(Error::NotOnnx { reason, .. }) => {
            assert!(reason.contains("tract could not parse it"), "{reason}")
        }
        Err(e) => panic!("expected tract's panic as NotOnnx, got {e}"),
        Ok(_) => panic!("the fuzzer's input loaded as a model"),
    }
}
