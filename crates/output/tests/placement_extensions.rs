//! The text printer's generic cells and footer lines for placement
//! extensions, on the one there is (`-B`'s bitwise repeatability): the
//! assertions of the former `text::bitwise` unit tests.

use collbench_core::extension_list::extensions;
use collbench_core::record::{BitPosition, Bitwise};
use collbench_core::{CaseResult, Placement};
use collbench_output::text::{extension_cell, extension_footer};

#[test]
fn a_row_with_differing_bits_fails_the_footer_and_an_unchecked_cell_is_na() {
    let diff = Bitwise {
        repeats: 4,
        different_elements: 1,
        different_bits: 1,
        first: Some(BitPosition {
            repeat: 2,
            rank: 1,
            element: 7,
            bit: 30,
        }),
    };
    let mut r = CaseResult::float_sum("all_reduce", 1024);
    r.out_of_place = Some(Placement {
        bitwise: Some(Bitwise::none_yet(4)),
        ..Placement::default()
    });
    r.in_place = Some(Placement {
        bitwise: Some(diff),
        ..Placement::default()
    });
    assert_eq!(
        extension_footer(&[r]),
        "# Bitwise mismatches   : 1 FAILED\n"
    );
    assert_eq!(
        extension_footer(&[CaseResult::float_sum("all_reduce", 8)]),
        ""
    );
    let bitwise = extensions()
        .iter()
        .find(|e| e.name() == "bitwise")
        .expect("listed");
    assert_eq!(extension_cell(*bitwise, None), "       N/A");
}
